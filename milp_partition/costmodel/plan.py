"""The run-objective planning problem's data: layers timed per micro-batch size, coefficients, a plan; no solving.

The problem (:class:`RunPlanProblem`): the layers of an imported model in execution order, each with its
forward and backward seconds at every candidate micro-batch size (from the calibration or from timing the
model's own layers at that size on the device), its parameter, buffer and activation bytes; the bytes that cross
each cut between consecutive layers; the global batch ``G``; ``k`` devices of ``memory_bytes`` each; and the
coefficients of :mod:`milp_partition.costmodel`.  A plan (:class:`RunPlan`): contiguous stages, one data-parallel
degree ``d`` for all of them, ``m`` micro-batches per replica (so micro-batches of ``b = G / (d m)`` samples), and
the recomputed layers.  Its price is :mod:`milp_partition.costmodel`'s step; the exact DP is
:mod:`milp_partition.joint.run_dp`, the independent evaluation :mod:`milp_partition.verifiers.joint_run`.
Tensor parallelism: a plan has one degree ``t`` for every stage (``run`` executes one ``(pp, dp, tp)`` mesh), among
:attr:`RunPlanProblem.tensor_degrees` (the degrees ``run`` can split every layer of the model at); each layer's
:attr:`RunLayer.splits` prices it at each ``t > 1`` (:mod:`milp_partition.costmodel.tensor`), and the plan holds
``p d t`` devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from milp_partition.costmodel.memory import MemoryCoefficients
from milp_partition.costmodel.step import DDP_BUCKET_BYTES
from milp_partition.costmodel.tensor import SplitCost, TensorParallelCoefficients


@dataclass(frozen=True)
class RunLayer:
    """One layer (a forward node of the import).

    Attributes
    ----------
    id
        The node's id (module path).
    forward_s, backward_s
        Micro-batch size (samples) -> seconds of the layer's forward / backward pass on one micro-batch.
    param_bytes, param_tensors, buffer_bytes
        The layer's parameters (bytes, tensors) and buffers.
    saved_bytes_per_sample
        ``a_v``: activations autograd keeps for the backward, per sample.
    input_bytes_per_sample
        ``in_v``: what a recomputed layer keeps instead (its input), per sample.
    busy_forward_s, busy_backward_s
        ``(ranks, micro-batch size) -> seconds``: the layer's passes timed while ``ranks`` processes run on the
        machine at once (a plan of ``p d`` ranks: each rank's cores are shared with the others); a pair not listed
        takes :attr:`forward_s` / :attr:`backward_s` (timed alone).
    saved_bytes_per_sample_at
        Micro-batch size -> ``a_v`` as measured at that size (autograd's per-sample bytes are not the same at every
        size); a size not listed takes :attr:`saved_bytes_per_sample`.
    """

    id: str
    forward_s: Mapping[int, float]
    backward_s: Mapping[int, float]
    param_bytes: float
    param_tensors: int
    buffer_bytes: float
    saved_bytes_per_sample: float
    input_bytes_per_sample: float
    busy_forward_s: Mapping[tuple[int, int], float] = field(default_factory=dict)
    busy_backward_s: Mapping[tuple[int, int], float] = field(default_factory=dict)
    saved_bytes_per_sample_at: Mapping[int, float] = field(default_factory=dict)
    #: Micro-batch size -> earlier layer's id -> bytes per sample this layer saves of tensors that layer saved first (a
    #: stage starting between them receives them and saves its own copy).
    reused_from_at: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    #: Tensor-parallel degree ``t > 1`` -> the layer split over ``t`` ranks as ``run`` splits it.
    splits: Mapping[int, SplitCost] = field(default_factory=dict)

    def split_at(self, t: int) -> SplitCost:
        """The layer at degree ``t``: :attr:`splits`'s entry, and at ``t = 1`` the whole layer (nothing split)."""
        if t > 1:
            return self.splits[t]
        return SplitCost(0.0, self.param_bytes, self.param_tensors, 0, 0)

    @property
    def recomputable(self) -> bool:
        """Recomputation saves memory only where the input is smaller than what autograd keeps."""
        return self.input_bytes_per_sample < self.saved_bytes_per_sample

    def recomputable_at(self, size: int, t: int = 1) -> bool:
        """:attr:`recomputable` at micro-batch size ``size`` and tensor-parallel degree ``t`` (with that ``a_v``)."""
        return self.input_bytes_per_sample < self.saved_at(size, t)

    def saved_at(self, size: int, t: int = 1) -> float:
        """``a_v`` at micro-batch size ``size`` on one of ``t`` ranks: at ``t > 1`` the split's measured
        :attr:`SplitCost.saved_bytes_per_sample_at` entry where it has one; else :attr:`saved_bytes_per_sample_at`'s
        entry, else the one figure (the ``t = 1`` count: an upper bound at ``t > 1``)."""
        if t > 1:
            at_t = self.splits[t].saved_bytes_per_sample_at
            if size in at_t:
                return at_t[size]
        return self.saved_bytes_per_sample_at.get(size, self.saved_bytes_per_sample)

    def forward_at(self, size: int, ranks: int = 1) -> float:
        """``f_v(b)`` with ``ranks`` processes at once: the busy timing where measured, else :attr:`forward_s`."""
        return self.busy_forward_s.get((ranks, size), self.forward_s[size])

    def backward_at(self, size: int, ranks: int = 1) -> float:
        """``g_v(b)`` with ``ranks`` processes at once: the busy timing where measured, else :attr:`backward_s`."""
        return self.busy_backward_s.get((ranks, size), self.backward_s[size])


@dataclass(frozen=True)
class RunCoefficients:
    """The calibrated coefficients of :mod:`milp_partition.costmodel` that are not per layer (seconds, bytes)."""

    p2p_alpha_s: float = 0.0
    p2p_beta_s_per_byte: float = 0.0
    allreduce_alpha_s: float = 0.0
    allreduce_beta_s_per_byte: float = 0.0
    optimizer_s_per_param_tensor: float = 0.0
    optimizer_s_per_param_byte: float = 0.0
    fixed_s: float = 0.0
    ddp_bucket_bytes: float = DDP_BUCKET_BYTES
    memory: MemoryCoefficients = field(default_factory=MemoryCoefficients)
    #: ``E`` per shape, ``(stages, data-parallel, micro-batches per replica, seconds)``: the runtime's own step of
    #: that shape with nothing to compute, as ``run`` measures it (run.json's ``prediction.costs.empty_step_s``);
    #: a shape not listed takes :attr:`fixed_s`.
    empty_step_s: tuple[tuple[int, int, int, float], ...] = ()
    #: DTensor's overheads (tensor parallelism), calibrated in the launch that measures ``E``.
    tensor: TensorParallelCoefficients = field(default_factory=TensorParallelCoefficients)
    #: ``E`` of tensor-parallel shapes, ``(stages, data-parallel, tensor-parallel t > 1, micro-batches per replica,
    #: seconds)``: the schedule over a ``(p, d, t)`` mesh with nothing to compute and nothing split (DTensor's hooks and
    #: the activation all-reduces are priced per split module, :mod:`milp_partition.costmodel.tensor`).
    tensor_empty_step_s: tuple[tuple[int, int, int, int, float], ...] = ()
    #: ``rho(d, b)``, ``(data-parallel, micro-batch size, seconds per parameter byte)``: what DDP's all-reduce costs a
    #: step beyond gloo's idle fit, per parameter byte, with ``d`` ranks computing at micro-batch size ``b`` on the same
    #: cores (measured by ``solve --time-layers``: the whole model's pass under DDP against the plain pass, every rank in
    #: step, less the fit's all-reduce of the model's bytes; :mod:`milp_partition.run.empty`); a pair not listed: 0.
    ddp_in_step_s_per_byte: tuple[tuple[int, int, float], ...] = ()
    #: ``kappa(b)`` of a one-rank plan, ``(micro-batch size, kappa_F, kappa_B)``: the passes inside ``run``'s step (less
    #: the empty step's module's, which ``E`` holds) over the layer timer's sums, measured by ``solve --time-layers`` on one
    #: rank (:mod:`milp_partition.run.inrun`).  The one-rank layer times are the timer's times these (already so in
    #: :attr:`RunLayer.busy_forward_s` at one rank: the DP and the verifier read those); ``run``'s prediction scales its
    #: own timer's layers by them (:func:`milp_partition.run.predict.planned_in_step_factors`).  A size not listed: 1.
    in_step_factors: tuple[tuple[int, float, float], ...] = ()

    def ddp_in_step_for(self, data_parallel: int, microbatch_size: int) -> float:
        """``rho(d, b)``: :attr:`ddp_in_step_s_per_byte`'s entry, else 0 (and 0 on one replica)."""
        if data_parallel <= 1:
            return 0.0
        for d, b, rho in self.ddp_in_step_s_per_byte:
            if (d, b) == (data_parallel, microbatch_size):
                return rho
        return 0.0

    def fixed_for(self, stages: int, data_parallel: int, microbatches: int, tensor_parallel: int = 1) -> float:
        """``E`` of the shape (``p`` stages, ``d``, ``m`` micro-batches per replica, ``t``): :attr:`empty_step_s`'s (or
        at ``t > 1`` :attr:`tensor_empty_step_s`'s) entry, else :attr:`fixed_s`."""
        if tensor_parallel > 1:
            for p, d, t, m, seconds in self.tensor_empty_step_s:
                if (p, d, t, m) == (stages, data_parallel, tensor_parallel, microbatches):
                    return seconds
            return self.fixed_s
        for p, d, m, seconds in self.empty_step_s:
            if (p, d, m) == (stages, data_parallel, microbatches):
                return seconds
        return self.fixed_s

    def latencies_in_empty(self, stages: int, data_parallel: int, microbatches: int, tensor_parallel: int = 1) -> bool:
        """Whether the shape's ``E`` was measured (:attr:`empty_step_s` lists it): then the empty step already holds every
        point-to-point message's latency and one bucket's all-reduce latency (it sends the same messages and
        all-reduces one bucket), so the stage terms price those without ``alpha`` (as ``run``'s own prediction does).
        At ``t > 1`` (:attr:`tensor_empty_step_s`) it holds the messages' latencies only: ``run`` runs no DDP there."""
        if tensor_parallel > 1:
            key = (stages, data_parallel, tensor_parallel, microbatches)
            return any((p, d, t, m) == key for p, d, t, m, _ in self.tensor_empty_step_s)
        return any((p, d, m) == (stages, data_parallel, microbatches) for p, d, m, _ in self.empty_step_s)


@dataclass(frozen=True)
class RunShape:
    """A forced plan shape (``None``: free): stages, data-parallel degree, micro-batches per replica, tensor-parallel."""

    stages: int | None = None
    data_parallel: int | None = None
    microbatches: int | None = None
    tensor_parallel: int | None = None


@dataclass(frozen=True)
class RunPlanProblem:
    """See the module docstring.  ``cut_bytes_per_sample[i]``: bytes crossing from layers ``0..i`` to the rest."""

    layers: tuple[RunLayer, ...]
    cut_bytes_per_sample: tuple[float, ...]
    global_batch: int
    devices: int
    memory_bytes: float
    coefficients: RunCoefficients = field(default_factory=RunCoefficients)
    recompute: bool = True
    shape: RunShape = field(default_factory=RunShape)
    name: str = ""
    #: ``x_in``: the model's inputs per sample.  ``run`` hands the first stage views of each step's global batch, so
    #: the first layer's saved input holds the storage of all ``G`` samples, and two steps' batches were measured live at
    #: once (the first step's shape-inference leftovers; run.json, MLP, d = 2, m = 1: 1024 bytes above one batch's
    #: view): stage 0 keeps ``max(2 G - y_0 b, 0) x_in`` beyond its ``y_0`` micro-batches in flight
    #: (:func:`batch_inputs_bytes`).
    input_bytes_per_sample: float = 0.0
    #: Whether the layers' :attr:`RunLayer.reused_from_at` were measured: then a later stage keeps, of what it
    #: receives, what its layers were measured to save again; else the whole cut (an upper bound).
    received_measured: bool = False
    #: The tensor-parallel degrees a plan may take (1 always; ``t > 1`` only where every layer has its
    #: :attr:`RunLayer.splits` entry: ``run`` can split the model so).
    tensor_degrees: tuple[int, ...] = (1,)

    def received_bytes_per_sample(self, first: int, end: int, size: int, t: int = 1) -> float:
        """``r_q``: the bytes per sample a stage of layers ``first..end-1`` keeps of what it receives (its own copy, saved by
        its layers): 0 on the first stage; measured, the bytes its layers save of what layers before ``first`` saved
        first (at ``t > 1`` as measured on the ``t``-rank mesh where every layer's split has that size); else the cut
        before it, ``y_{first-1}``."""
        if first == 0:
            return 0.0
        before = {v.id for v in self.layers[:first]}
        if t > 1 and all(size in v.splits[t].reused_from_at for v in self.layers):
            return sum(x for v in self.layers[first:end] for u, x in v.splits[t].reused_from_at[size].items() if u in before)
        if not self.received_measured:
            return self.cut_bytes_per_sample[first - 1]
        return sum(x for v in self.layers[first:end] for u, x in v.reused_from_at.get(size, {}).items() if u in before)

    def batch_inputs_bytes(self, stage: int, in_flight: int, microbatch_size: int) -> float:
        """The model's inputs stage ``stage`` (0-based) keeps beyond its ``in_flight`` micro-batches of
        ``microbatch_size`` samples: ``max(2 G - y b, 0) x_in`` on the first stage, 0 on the others."""
        if stage != 0:
            return 0.0
        return max(2 * self.global_batch - in_flight * microbatch_size, 0) * self.input_bytes_per_sample

    def __post_init__(self) -> None:
        if len(self.cut_bytes_per_sample) != max(len(self.layers) - 1, 0):
            raise ValueError(f"{len(self.layers)} layers need {len(self.layers) - 1} cuts, got {len(self.cut_bytes_per_sample)}")
        if self.global_batch < 1 or self.devices < 1:
            raise ValueError("the global batch and the devices must be positive")
        for t in self.tensor_degrees:
            if t < 1 or (t > 1 and any(t not in v.splits for v in self.layers)):
                raise ValueError(f"tensor-parallel degree {t}: every layer needs its split at that degree")

    @property
    def sizes(self) -> tuple[int, ...]:
        """The micro-batch sizes every layer is timed at."""
        if not self.layers:
            return ()
        common = set(self.layers[0].forward_s)
        for v in self.layers:
            common &= set(v.forward_s) & set(v.backward_s)
        return tuple(sorted(common))


@dataclass(frozen=True)
class RunPlan:
    """Stages as ``(first, end)`` layer positions (end exclusive), ``d``, ``m``, the recomputed layers' ids and ``t``."""

    stages: tuple[tuple[int, int], ...]
    data_parallel: int
    microbatches: int
    recomputed: frozenset[str] = frozenset()
    tensor_parallel: int = 1

    def microbatch_size(self, global_batch: int) -> int:
        """``b = G / (d m)`` (the caller checks that it divides)."""
        return global_batch // (self.data_parallel * self.microbatches)
