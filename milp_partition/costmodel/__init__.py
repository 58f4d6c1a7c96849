r"""The one cost model of a training step as ``run`` executes it: formulas and their coefficients, plain data.

Every place that prices a plan for an imported model reads these formulas: the run's prediction
(:mod:`milp_partition.run.predict`), the planner's exact DP over the run's objective
(:mod:`milp_partition.joint.run_dp`) and the independent verifier's recomputation
(:mod:`milp_partition.verifiers.joint_run`, which may read this module because it is data and arithmetic,
never a formulation or a search).  Piper's objective (:mod:`milp_partition.joint.problem`) is not this model
and is unchanged for Piper's instances.

A plan: ``p`` pipeline stages ``q = 0..p-1`` (contiguous ranges of the layers in execution order), each
replicated over ``d`` data-parallel ranks; a global batch of ``G`` samples split into ``d m`` micro-batches of
``b = G / (d m)`` samples each (``m`` micro-batches per replica, 1F1B); a set ``R`` of recomputed layers.

Step time (:mod:`.step`)
------------------------
* A layer ``v`` at micro-batch size ``b``: ``f_v(b)``, ``g_v(b)`` forward and backward seconds, either timed on
  the device at that size, or from the calibration, operator by operator (:func:`.step.operator_s`)::

      f_op(b) = o_fwd + max(b F_op / R_mm, b X_op beta_mem)       g_op(b) = o_bwd + max(b F'_op / R_mm, 2 b X_op beta_mem)

  ``o_fwd``, ``o_bwd``: torch's per-operator dispatch and autograd overhead; ``R_mm``: the device's matrix rate;
  ``beta_mem``: seconds per byte moved; ``F``, ``F'``, ``X``: one sample's forward FLOPs, backward FLOPs and
  bytes.  The overheads do not scale with ``b``: that is why the micro-batch size is a decision.
  Timed (``solve --time-layers``), a plan of ``p d t`` ranks reads its layers as timed with that many ranks in step
  (``RunLayer.busy_forward_s``); a plan of one rank reads them as they run inside ``run``'s own step:
  ``f_v(b) = kappa_F(b) f_v^timer(b)``, ``g_v(b) = kappa_B(b) g_v^timer(b)``, where ``kappa(b)`` is the passes of
  ``Schedule1F1B``'s step over ``N = G / b`` micro-batches (forward chunks with the loss, backward chunks, per
  micro-batch) less those of the empty step's tiny module (which ``E`` holds), over the layer timer's sums, measured
  round by round beside it on one rank pinned as ``run`` pins it (:mod:`milp_partition.run.inrun`;
  ``RunCoefficients.in_step_factors``, which ``run``'s prediction reads to scale its own timer's layers).
* A stage ``q``: ``F_q = sum_{v in q} f_v``, ``B_q = sum_{v in q} (g_v + [v in R] f_v)`` (a recomputed layer runs
  its forward again before its backward), ``c_q = alpha_p2p + b y_q beta_p2p`` the point-to-point message to
  the next stage (``y_q``: bytes per sample crossing the boundary; ``c_{p-1} = 0``), once forward and once
  backward: ``u_q = F_q + B_q + 2 c_q``.
* 1F1B over ``m`` micro-batches: the first crosses every stage (fill and drain), the other ``m - 1`` follow
  at the pace of the slowest stage; ``E`` is the runtime's own step of the shape ``(p, d, m)`` with nothing to
  compute (schedule, latencies, DDP's hooks), measured before planning by ``solve --time-layers``
  (:mod:`milp_partition.run.empty`: the function ``run`` measures its own with) or taken from runs
  (``--empty-steps``); 0 where not measured.  A measured ``E`` holds every message's latency and one bucket's
  all-reduce latency: those shapes price ``c_q`` and ``AR_q`` without them (``RunCoefficients.latencies_in_empty``)::

      pipeline = sum_q u_q + (m - 1) max_q u_q + E

* The tail of stage ``q``: DDP's bucketed gradient all-reduce when ``d > 1``,
  ``AR_q = ceil(W_q / 25 MiB) alpha_ar + W_q (beta_ar + rho(d, b))`` (``W_q``: the stage's parameter bytes), then
  the optimizer step ``O_q = n_q o_opt + W_q k beta_mem`` (``n_q`` parameter tensors).  ``rho(d, b)``: what the
  all-reduce costs inside a step beyond gloo's idle fit, per parameter byte, with ``d`` ranks computing at micro-batch
  size ``b`` on the same cores (``RunCoefficients.ddp_in_step_s_per_byte``): ``solve --time-layers`` times the whole
  model's pass plain and under DDP over ``d`` ranks, back to back, every rank in step, and takes what DDP added less
  the idle fit's all-reduce of the model's bytes (``max(., 0) / W``; :mod:`milp_partition.run.empty`).  Measured on
  2 CPU ranks on 2 cores, it is several times the idle fit (docs/import.md): gloo's all-reduce runs on its own
  thread, which the ranks' compute leaves no core for, and DDP's wait for it holds both ranks to the slower one.
  ``run``'s own prediction reads the plan's ``rho`` of its shape (:func:`milp_partition.run.predict.planned_ddp_in_step`;
  it does not measure its own).
* ``step = pipeline + max_q (AR_q + O_q)``: the step of the global batch, in seconds.

Memory (:mod:`.memory`), an upper bound of what one rank of stage ``q`` holds
----------------------------------------------------------------------------
* weights ``W_q``, gradients ``W_q``, optimizer state ``k_opt W_q`` (Adam: 2; SGD with momentum: 1), buffers;
* saved activations of the micro-batches in flight: under 1F1B stage ``q`` of ``p`` holds at most
  ``min(m, p - q)`` micro-batches (plus, on the first stage, ``first_stage_extra_microbatches``: torch's
  ``Schedule1F1B`` was measured to hold one more there, its first step's shape-inference forward, even at ``m = 1``;
  and the model's inputs of two global batches, ``max(2 G - y_0 b, 0) x_in`` beyond those in flight: ``run`` hands it
  views of each step's batch), each ``b (r_q + sum_{v in q} (v in R ? in_v : a_v))`` (a recomputed layer keeps only
  its input; ``r_q``, 0 on the first stage: its own copy of what it receives, as far as its layers save it, while the
  sender's count holds the sender's: measured by the layer timer as the bytes a layer saves of what an earlier layer
  saved first, else the whole cut ``y_{q-1}``; ``RunPlanProblem.received_bytes_per_sample``);
* autograd temporaries: the largest recomputed layer's activations ``b max_{v in q cap R} a_v`` (re-run one at a
  time) plus the backward's largest transient ``b max_{v in q} a_v`` (a layer's gradients of its saved tensors);
* allocator rounding: every tensor rounded up to ``rounding_bytes`` (512 on the CUDA caching allocator; 0 on
  the CPU, where run.json counts tensor bytes exactly), at most ``tensors x rounding_bytes`` (the parameters'
  tensors: weights, gradients, optimizer state; the activations' tensors are not counted yet).

Tensor parallelism (:mod:`.tensor`)
-----------------------------------
A plan has one tensor-parallel degree ``t`` (every stage on ``d t`` ranks, ``p d t <= k``; ``t`` among the degrees
``run`` can split the model at, :mod:`milp_partition.joint.run_split`).  At ``t > 1`` a layer's passes are
``f_v(b) (1 - phi_v + phi_v / t)`` plus its activation all-reduces (``alpha_ar + b x beta_ar`` each, forward and
backward, from gloo's fit) plus DTensor's cost ``n_v o_dt / 2`` each way (``n_v`` split modules; ``o_dt`` measured in
the launch that measures ``E``, on the ``t``-rank mesh as the empty step with column / row pairs less the one without,
so it holds each all-reduce's latency and the all-reduces are priced by their bytes); each rank holds its share of the split weights, gradients and
optimizer state (a row module's bias whole), and the optimizer pays ``o_dt,opt`` more per DTensor parameter; each
rank's saved activations are ``a_v(t, b)``, measured on the ``t``-rank mesh in the launch that measures ``E``
(:mod:`milp_partition.run.tp_saved`), in every memory term, and where not measured the ``t = 1`` count (an upper
bound).  ``E`` of a tensor-parallel shape ``(p, d, t, m)`` is the schedule over a ``(p, d, t)``
mesh with nothing split and no DDP (``run`` all-reduces the gradients by hand there): it holds the messages'
latencies, not the all-reduces'.

Not here yet: stages of different degrees (``run`` executes them on its own schedule, whose ``E`` is not measured),
``E`` on GPU ranks (the calibration runs CPU ranks with gloo), and the GPU's workspaces and rounding as calibrated
values (the fields exist in :class:`.memory.MemoryCoefficients`).
"""
