"""The predicted step time of a plan *as run* (``milp-partition run``): the one cost model's formulas on measured inputs.

The formulas (1F1B with fill and drain, DDP's bucketed all-reduce, messages, the optimizer step) live in
:mod:`milp_partition.costmodel` and are the ones the run-objective planner (:mod:`milp_partition.joint.run_dp`)
and its verifier price plans with; this module measures their inputs in the run (layers timed on one sample,
gloo's fits, DTensor's overheads, the empty plan's step) and calls them.  What it prices, one micro-batch of one
sample at a time:

* **A layer's forward / backward per micro-batch** at tensor-parallel degree ``t``: for each of its
  operators as one of ``t`` devices runs it (:func:`~milp_partition.joint.megatron.scaled_op`), with
  FLOPs and bytes for one sample (the import's divided by its batch)::

      fwd_op = o_fwd + max(flops / R, bytes * beta_mem)        bwd_op = o_bwd + max(bwd_flops / R, 2 bytes * beta_mem)

  ``o_fwd``, ``o_bwd``: torch's eager and autograd overhead per operator; ``R``: torch's matrix-product
  rate on one thread; both measured on this CPU by :func:`calibrate_torch` (a chain of tiny operators, a
  few products; never the model). ``beta_mem``: the profile's memory fit. ``bwd_op`` is counted only for
  operators with a backward. A one-rank plan's layers are scaled by the plan's ``(kappa_F, kappa_B)``
  (:func:`planned_in_step_factors`, :mod:`milp_partition.run.inrun`: the passes inside the step over the timer's),
  as its planner priced them. With ``t > 1``: ``o_dtensor`` per split linear module (DTensor's hooks, forward
  and backward, measured on a one-rank mesh) plus each forward (row) and backward (column) all-reduce of
  the layer, ``2 (t-1)/t * bytes * beta_ar + 2 (t-1) * alpha_ar``, one message each. A recomputed layer
  runs its forward twice.
* **A stage** ``q``: ``f_q``, ``b_q`` = the sums over its layers, plus the cross-entropy loss on the last
  stage; ``c_q`` = the stage boundary's point-to-point message after it, ``alpha_p2p + bytes * beta_p2p``
  (the gloo fit ``links["d2d"]``), once forward and once backward.
* **1F1B** with ``p`` stages and ``m = N / d`` micro-batches per data-parallel replica: the first micro-batch
  crosses every stage, the other ``m - 1`` follow at the pace of the slowest::

      pipeline = sum_q (f_q + b_q + 2 c_q) + (m - 1) * max_q (f_q + b_q + 2 c_q) + m * o_sched

  (``(m + p - 1) x`` the bottleneck when the stages are equal); ``o_sched`` is the schedule's own
  per-micro-batch bookkeeping, which is not measured here (0).
* **The tail**: DDP's gradient all-reduce when ``d > 1`` (the last micro-batch's backward; one ring
  all-reduce per 25 MiB bucket, ``2 (d-1)/d * bytes * beta_ar + 2 (d-1) * alpha_ar`` each), then the
  optimizer step on the stage's parameters: ``o_opt`` per parameter tensor plus ``k * param bytes * beta_mem``
  (``k`` = bytes touched per parameter byte: 4 for SGD, 7 for Adam).

``step = max over stages of (pipeline + tail_q)``; :func:`step_time` is the formula alone (unit-tested on
a hand-computed case), :func:`predict_step` builds its inputs from a plan and its imported graph.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from milp_partition.calibration.timing import median_seconds
from milp_partition.costmodel.step import (
    DDP_BUCKET_BYTES,
    StageTimes,
    StepPrediction,
    allreduce_s,
    ddp_allreduce_s,
    message_s,
    optimizer_step_s,
    step_time,
)
from milp_partition.costmodel.tensor import split_compute_s
from milp_partition.errors import InputError
from milp_partition.importers.timing import load_profile_spec, op_times
from milp_partition.io.imported_layers import read_layers
from milp_partition.joint.megatron import split_layer
from milp_partition.run.interleave import interleaved_rounds, model_bytes, size_groups
from milp_partition.run.model import batch, batch_on, build_model, loss_fn, optimizer
from milp_partition.run.spec import RunSpec


@dataclass(frozen=True)
class TorchCosts:
    """DTensor's overheads on this CPU (:func:`calibrate_runtime`), seconds.

    ``dtensor_module_s``: a ``ColwiseParallel`` / ``RowwiseParallel`` linear module's forward plus backward
    beyond the plain module's; ``dtensor_optimizer_tensor_s``: the optimizer's step on a DTensor parameter
    beyond a plain one's.
    """

    dtensor_module_s: float = 0.0
    dtensor_optimizer_tensor_s: float = 0.0


# -- calibration -----------------------------------------------------------------------------------


def calibrate_runtime(threads: int = 1, repeats: int = 7, group: Any = None) -> TorchCosts:
    """Torch's distributed overheads on this CPU, on tiny modules (never the model).

    DTensor: a column- then row-parallel pair of small linear modules on a one-rank mesh against the plain
    pair, forward plus backward (per module), and an Adam step on their parameters (per tensor). Needs a one-rank process
    group: ``group`` (inside a run: each rank's own, so that nothing waits on another rank), else a one-rank
    gloo group started here (a file store in a temporary directory) and destroyed after.
    """
    import os
    import tempfile

    import torch
    import torch.distributed as dist
    from torch import nn

    own = group is None
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="milp-dtensor-") as tmp:
        try:
            if own:
                dist.init_process_group("gloo", store=dist.FileStore(os.path.join(tmp, "store"), 1), rank=0, world_size=1)
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

            def pair() -> Any:
                torch.manual_seed(0)
                return nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))

            plain, split = pair(), pair()
            pg: Any = group if group is not None else dist.group.WORLD
            mesh = DeviceMesh.from_group(pg, "cpu")
            parallelize_module(split, mesh, {"0": ColwiseParallel(), "1": RowwiseParallel()})
            x = torch.randn(1, 4, 8)
            times = {}
            for name, m in (("plain", plain), ("split", split)):
                opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=False)

                def fb(m: Any = m) -> None:
                    m(x).sum().backward()

                fb()
                opt.step()
                times[name] = (median_seconds(fb, repeats), median_seconds(opt.step, repeats))
        finally:
            if own and dist.is_initialized():
                dist.destroy_process_group()
            torch.set_num_threads(previous)
    module = max(times["split"][0] - times["plain"][0], 0.0) / 2.0
    tensor = max(times["split"][1] - times["plain"][1], 0.0) / 4.0
    return TorchCosts(module, tensor)


# -- the model's layers at one sample, in torch ------------------------------------------------------


@dataclass(frozen=True)
class LayerProfile:
    """Forward and backward seconds of each graph node for one sample (one micro-batch), and the optimizer's step.

    Measured by :func:`measure_layers` on the real module in one process (module hooks' timestamps):
    a node's forward runs from its module's forward pre-hook to the next node's, its backward from the moment the
    gradient of its module's output is ready to the previous node's (operators outside any module fall to the node
    before them; the loss to the last node); then the hooks' own cost comes off (:class:`LayerTimer`).
    """

    forward_s: dict[str, float]
    backward_s: dict[str, float]
    optimizer_s_per_param_tensor: float
    threads: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LayerTimer:
    """The whole model (a copy of its own) on one micro-batch, timed two ways per :meth:`sample`: a pass with hooks that
    timestamp each node, and the same pass without them, as training runs it.

    Each node's time is its share of the hooked pass less its share of the hooks' own cost: with ``n`` nodes stamped
    in a direction (forward, backward), ``(H - P) / n`` comes off each, where ``H`` is the hooked pass's and ``P`` the
    plain pass's time in that direction, so that the nodes sum to the plain pass (each node carries the same hooks: a
    forward pre-hook, a forward hook and a hook on its output's gradient); a node is never below 0, and what a short
    node cannot give comes evenly off the others (:func:`hooks_removed`).  Before (issue 42,
    docs/import.md): full backward pre-hooks and no plain pass, and the layers summed to 1.15-2.75x the pass without
    hooks (thread CPU time: the MLP's 9 nodes 2.7x, the ConvNet 1.7-1.9x, the Encoder 1.2-1.4x, GPT 1.15-1.2x).

    A run calls :meth:`sample` just before each of its steps, so that the layers are timed under the same
    load as the step they predict; :meth:`profile` gives the medians.
    """

    def __init__(
        self,
        spec: RunSpec,
        threads: int = 1,
        seed: int = 0,
        device: Any = None,
        samples: int = 1,
        count_saved: bool = False,
        prepare: Callable[[Any], None] | None = None,
    ) -> None:
        """``device``: where the model runs (default the CPU); on a GPU each timestamp waits for the queued kernels.
        ``samples``: the micro-batch size timed (at most ``spec.microbatches``).  ``count_saved``: also count, per node,
        the bytes autograd saves for the backward as the run counts them (each storage once, parameters excluded; a
        DTensor: its local shard, as run.json counts it), in :attr:`saved_bytes` (the last pass).  ``prepare``: called on
        the model before the hooks and the optimizer (``run``'s tensor-parallel split of it, :func:`saved_at_degree`)."""
        self.threads = threads
        self.model = build_model(spec, seed)
        args, kwargs, target = batch(spec, self.model, 0, seed)
        if prepare is not None:
            prepare(self.model)
        self.named = dict(self.model.named_modules())
        self.points = [v for v in spec.node_order if v in self.named and v != ""]
        # copies of the first samples: autograd's saved inputs then hold this micro-batch's storage, not the batch's
        self.args = [a[:samples].clone() for a in args]
        self.kwargs = {k: v[:samples].clone() for k, v in kwargs.items()}
        self.target = target[:samples]
        if device is not None:
            self.model.to(device)
            self.args, self.kwargs, self.target = batch_on(device, self.args, self.kwargs, self.target)
        self.sync_device = device if is_cuda(device) else None
        self.fstamp: dict[str, float] = {}
        self.bstamp: dict[str, float] = {}
        self.handles: list[Any] = []
        #: per sample, the plain pass's (forward, backward) seconds and the hooked pass's, as timed (before the correction)
        self.passes: list[tuple[float, float, float, float]] = []
        self.fwd: dict[str, list[float]] = {v: [] for v in self.points}
        self.bwd: dict[str, list[float]] = {v: [] for v in self.points}
        self.opt = optimizer(spec, self.model.parameters())
        self.opt_times: list[float] = []
        self.n_params = len(list(self.model.parameters()))
        self.count_saved = count_saved
        self.param_storages = {
            (p.to_local() if hasattr(p, "to_local") else p).untyped_storage().data_ptr() for p in self.model.parameters()
        }
        self.current: str | None = None
        self.seen: dict[int, str] = {}  # storage -> the node that saved it first
        self.saved_bytes: dict[str, int] = {}
        #: node -> earlier node -> bytes this node saves of storages the earlier one saved first (the last pass): what a
        #: pipeline stage starting between them saves again, as its own copy of what it receives
        self.reused_bytes: dict[str, dict[str, int]] = {}
        self.reused_seen: set[tuple[str, int]] = set()
        self.sample(record=False)  # warm-up

    def now(self) -> float:
        """A timestamp (on a GPU, once the kernels queued before it are done)."""
        if self.sync_device is not None:
            import torch

            torch.cuda.synchronize(self.sync_device)
        return time.perf_counter()

    def _enter(self, v: str) -> None:
        self.current = v
        self.fstamp[v] = self.now()

    def _leave(self, v: str, out: Any) -> None:
        """After node ``v``'s forward: a hook on its output's gradient, which stamps the start of ``v``'s backward."""
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if getattr(t, "requires_grad", False) and hasattr(t, "register_hook"):
                t.register_hook(lambda g, v=v: self.bstamp.__setitem__(v, self.now()))
                return

    def _hook(self) -> None:
        for v in self.points:
            mod = self.named[v]
            self.handles.append(mod.register_forward_pre_hook(lambda m, a, v=v: self._enter(v)))
            self.handles.append(mod.register_forward_hook(lambda m, a, out, v=v: self._leave(v, out)))

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def plain_pass(self, clock: Callable[[], float] | None = None) -> tuple[float, float]:
        """The forward (with the loss) and the backward without hooks, as training runs them; seconds on ``clock``
        (default the timer's own)."""
        now = self.now if clock is None else clock
        t0 = now()
        loss = loss_fn(self.model(*self.args, **self.kwargs), self.target)
        t1 = now()
        loss.backward()
        t2 = now()
        self.opt.zero_grad(set_to_none=True)
        return t1 - t0, t2 - t1

    def _pack(self, t: Any) -> Any:
        local = t.to_local() if hasattr(t, "to_local") else t
        storage = local.untyped_storage()
        key = storage.data_ptr()
        if key in self.param_storages or storage.nbytes() == 0:
            return t
        node = self.current if self.current is not None else (self.points[0] if self.points else "")
        if key not in self.seen:
            self.seen[key] = node
            self.saved_bytes[node] = self.saved_bytes.get(node, 0) + storage.nbytes()
        elif self.seen[key] != node and (node, key) not in self.reused_seen:
            self.reused_seen.add((node, key))
            by = self.reused_bytes.setdefault(node, {})
            by[self.seen[key]] = by.get(self.seen[key], 0) + storage.nbytes()
        return t

    def sample(self, record: bool = True) -> None:
        """One forward, backward and optimizer step on the micro-batch with its nodes stamped, then the same pass
        without hooks; each node's time recorded (see the class)."""
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            self.fstamp.clear()
            self.bstamp.clear()
            self._hook()
            t0 = self.now()
            if self.count_saved:
                self.current, self.seen, self.saved_bytes = None, {}, {}
                self.reused_bytes, self.reused_seen = {}, set()
                with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda x: x):
                    loss = loss_fn(self.model(*self.args, **self.kwargs), self.target)
            else:
                loss = loss_fn(self.model(*self.args, **self.kwargs), self.target)
            t1 = self.now()
            loss.backward()
            t2 = self.now()
            self._unhook()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            t3 = self.now()
            plain = self.plain_pass()
        finally:
            self._unhook()
            torch.set_num_threads(previous)
        if not record:
            return
        self.passes.append((plain[0], plain[1], t1 - t0, t2 - t1))
        seen = [v for v in self.points if v in self.fstamp]
        fwd = {}
        for i, v in enumerate(seen):
            start = t0 if i == 0 else self.fstamp[v]
            end = self.fstamp[seen[i + 1]] if i + 1 < len(seen) else t1
            fwd[v] = end - start
        back = sorted((self.bstamp[v], v) for v in seen if v in self.bstamp)
        bwd = {}
        for i, (_, v) in enumerate(back):
            start = t1 if i == 0 else back[i][0]
            end = back[i + 1][0] if i + 1 < len(back) else t2
            bwd[v] = end - start
        for v, x in hooks_removed(fwd, plain[0]).items():
            self.fwd[v].append(x)
        for v, x in hooks_removed(bwd, plain[1]).items():
            self.bwd[v].append(x)
        self.opt_times.append(t3 - t2)

    def profile(self) -> LayerProfile:
        """The medians of the recorded passes."""
        return LayerProfile(
            {v: statistics.median(x) if x else 0.0 for v, x in self.fwd.items()},
            {v: statistics.median(x) if x else 0.0 for v, x in self.bwd.items()},
            (statistics.median(self.opt_times) if self.opt_times else 0.0) / max(self.n_params, 1),
            self.threads,
        )


def hooks_removed(hooked: Mapping[str, float], plain_s: float) -> dict[str, float]:
    """Each node's seconds in a hooked pass less one even share ``s`` of the hooks' cost, never below 0, the share
    chosen so that the nodes sum to ``plain_s`` (the pass without hooks): ``sum_v max(hooked_v - s, 0) = plain_s``.

    Every node carries the same hooks, so each carries the same share of their cost, ``(sum(hooked) - plain_s) / n``
    over ``n`` nodes; a node shorter than that ends at 0 and what it could not give comes evenly off the others (the
    share rises until the sum is met).  A plain pass that took longer than the hooked one (a load spike) adds its
    excess evenly.  ``plain_s <= 0`` gives every node 0."""
    if not hooked:
        return {}
    if plain_s <= 0:
        return {v: 0.0 for v in hooked}
    xs = sorted(hooked.values())
    rest = math.fsum(xs)
    share = (rest - plain_s) / len(xs)
    for k, x in enumerate(xs):  # nodes 0..k-1 (the shortest) at 0, the others give share each
        share = (rest - plain_s) / (len(xs) - k)
        if x >= share:
            break
        rest -= x
    return {v: max(x - share, 0.0) for v, x in hooked.items()}


def measure_layers(spec: RunSpec, threads: int = 1, repeats: int = 5, seed: int = 0) -> LayerProfile:
    """Time the model's nodes on one sample with autograd on (the run's micro-batch), wall time, medians of ``repeats``."""
    timer = LayerTimer(spec, threads, seed)
    for _ in range(repeats):
        timer.sample()
    return timer.profile()


@dataclass(frozen=True)
class SizeTimings:
    """The model's own layers timed at each micro-batch size (:func:`time_layers_by_size`).

    Attributes
    ----------
    times
        Size -> node -> (forward, backward) seconds of one micro-batch (medians).
    optimizer_s_per_param_tensor
        The optimizer step's seconds per parameter tensor (at the largest size).
    saved_bytes_per_sample
        Size -> node -> the bytes autograd saves per sample at that size, as the run counts them (each storage once,
        parameters excluded; the loss's saved tensors fall to the last node).
    """

    times: dict[int, dict[str, tuple[float, float]]]
    optimizer_s_per_param_tensor: float
    saved_bytes_per_sample: dict[int, dict[str, float]]
    #: Size -> node -> earlier node -> bytes per sample the node saves of what the earlier node saved first (a stage
    #: starting between them receives it and saves its own copy).
    reused_bytes_per_sample: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)


def layer_spec(data: dict[str, Any], graph_path: str, sizes: Sequence[int]) -> RunSpec:
    """The one-process :class:`RunSpec` the layer timer builds the imported model from (no stages; micro-batches of up
    to ``max(sizes)`` samples).

    Raises
    ------
    InputError
        When the graph records no model reference (``layers.model``).
    """
    layers = data.get("layers") if isinstance(data, dict) else None
    model = layers.get("model") if isinstance(layers, dict) else None
    if not isinstance(model, dict) or "reference" not in model:
        raise InputError(
            "the graph records no model reference to time its layers: import it again with 'milp-partition import torch'",
            source=graph_path,
        )
    assert isinstance(layers, dict)
    forward = tuple(str(n["id"]) for n in data.get("nodes", []) if not str(n["id"]).endswith(":bwd"))
    spec = RunSpec(
        model=str(model["reference"]),
        inputs=tuple(str(s) for s in model["inputs"]),
        dtype=str(layers.get("dtype") or "float32"),
        stages=(),
        node_order=forward,
        microbatches=max(sizes),
        predicted_step_s=float("nan"),
        optimizer_state_factor=float(layers.get("optimizer_state_bytes_per_param_byte", 0.0)),
        graph_path=graph_path,
        plan_path="",
        graph=data,
    )
    return spec


def time_layers_by_size(
    data: dict[str, Any],
    graph_path: str,
    sizes: Sequence[int],
    threads: int = 1,
    repeats: int = 5,
    seed: int = 0,
    before_size: Callable[[], None] | None = None,
) -> SizeTimings:
    """The imported model's own layers timed on this CPU at each micro-batch size (``solve --time-layers``' role).

    The model is built from the import's reference (``layers.model``); a graph without one is refused.
    ``before_size``: called before each size's timer is built (a barrier, when several ranks time at once).
    """
    spec = layer_spec(data, graph_path, sizes)
    forward = spec.node_order
    out: dict[int, dict[str, tuple[float, float]]] = {}
    saved: dict[int, dict[str, float]] = {}
    reused: dict[int, dict[str, dict[str, float]]] = {}
    per_tensor = 0.0
    for b in sorted(sizes):
        if before_size is not None:
            before_size()
        timer = LayerTimer(spec, threads, seed, samples=b, count_saved=True)
        for _ in range(repeats):
            timer.sample()
        prof = timer.profile()
        out[b] = {v: (prof.forward_s.get(v, 0.0), prof.backward_s.get(v, 0.0)) for v in forward}
        per_tensor = prof.optimizer_s_per_param_tensor
        saved[b] = {v: nbytes / b for v, nbytes in timer.saved_bytes.items()}
        reused[b] = {v: {u: x / b for u, x in by.items()} for v, by in timer.reused_bytes.items()}
    return SizeTimings(out, per_tensor, saved, reused)


@dataclass(frozen=True)
class LockstepTimings:
    """What :func:`time_layers_in_lockstep` measured on one rank.

    Attributes
    ----------
    layers
        Size -> node -> (forward seconds per pass, backward seconds per pass), the model alone on each rank (no DDP).
    ddp_totals
        ``(d, size)`` -> per pass, (the plain pass's forward + backward seconds, the same pass's under
        ``DistributedDataParallel`` over ``d`` ranks), the two timed back to back in step with every rank.
    """

    layers: dict[int, dict[str, tuple[list[float], list[float]]]]
    ddp_totals: dict[tuple[int, int], list[tuple[float, float]]] = field(default_factory=dict)


def _last_pass_s(timer: LayerTimer) -> float:
    """The forward and backward seconds of ``timer``'s last recorded pass, summed over its nodes."""
    return math.fsum(timer.fwd[v][-1] + timer.bwd[v][-1] for v in timer.points if timer.fwd[v] and timer.bwd[v])


class _LockstepSize:
    """One micro-batch size's layer timer and its copies under DDP (one per data-parallel degree) for
    :func:`time_layers_in_lockstep`; each pass begins at the group's barrier."""

    def __init__(
        self,
        spec: RunSpec,
        b: int,
        threads: int,
        seed: int,
        barrier: Callable[[], None],
        ddp: Mapping[int, tuple[Any, Sequence[int]]],
    ) -> None:
        from torch.nn.parallel import DistributedDataParallel

        self.b, self.barrier = b, barrier
        barrier()
        self.timer = LayerTimer(spec, threads, seed, samples=b)
        self.wrapped: dict[int, LayerTimer] = {}
        self.totals: dict[int, list[tuple[float, float]]] = {}
        for d, (group, at) in sorted(ddp.items()):
            if b in at:
                self.wrapped[d] = LayerTimer(spec, threads, seed, samples=b)
                barrier()
                self.wrapped[d].model = DistributedDataParallel(self.wrapped[d].model, process_group=group)
                self.totals[d] = []

    def one_pass(self, record: bool) -> None:
        """The plain pass, then each DDP copy's, every one started at the barrier; the sums recorded with ``record``."""
        self.barrier()
        self.timer.sample(record=record)
        for d, other in self.wrapped.items():
            self.barrier()
            other.sample(record=record)
            if record:
                self.totals[d].append((_last_pass_s(self.timer), _last_pass_s(other)))


def time_layers_in_lockstep(
    data: dict[str, Any],
    graph_path: str,
    sizes: Sequence[int],
    barrier: Callable[[], None],
    threads: int = 1,
    repeats: int = 7,
    seed: int = 0,
    ddp: Mapping[int, tuple[Any, Sequence[int]]] | None = None,
    min_seconds: float = 0.0,
    agree_max: Callable[[float], float] | None = None,
) -> LockstepTimings:
    """The imported model's layers at each micro-batch size, every pass started at ``barrier`` (called by every rank of a
    group at once): size -> node -> (forward seconds, backward seconds), one entry per pass, in pass order.

    A plan's ranks compute at the same moment (the run's barriers, DDP's all-reduce and the pipeline's messages keep
    them in step), so on a machine whose cores they share, its layers are timed so: one barrier per size let the ranks
    drift apart, and part of their passes ran alone (docs/import.md, the diagnosis of issue 42).  The pass after
    each timer's own warm-up is one more warm-up, in step.  ``repeats`` passes at least, the sizes in turn pass by
    pass, for at least ``min_seconds`` (:func:`milp_partition.run.interleave.interleaved_rounds`, its count agreed over
    the ranks by ``agree_max``, the largest of a number over them; sizes too large to hold at once are timed one after
    another, :func:`milp_partition.run.interleave.size_groups`).

    ``ddp``: ``d`` -> (this rank's data-parallel process group of ``d`` ranks, the sizes of the shapes with that ``d``):
    at those sizes each plain pass is followed, in step, by the same pass of a copy of the model under
    ``DistributedDataParallel`` over that group (its hooks, its bucketed all-reduce in the backward, which waits for
    it), so that what DDP adds to a step on these cores is measured beside what it adds to (:attr:`LockstepTimings.
    ddp_totals`).  Collective: every rank calls it with the same sizes and ``d``'s.
    """
    spec = layer_spec(data, graph_path, sizes)
    out: dict[int, dict[str, tuple[list[float], list[float]]]] = {}
    totals: dict[tuple[int, int], list[tuple[float, float]]] = {}
    copies = 1 + len(ddp or {})  # the timer's model and a DDP copy per degree, at most
    for group in size_groups(sizes, copies * model_bytes(data), min_seconds):
        states = [_LockstepSize(spec, b, threads, seed, barrier, ddp or {}) for b in group.sizes]
        barrier()
        interleaved_rounds(states, _LockstepSize.one_pass, repeats, group.seconds, agree_max)
        for state in states:
            out[state.b] = {v: (list(state.timer.fwd[v]), list(state.timer.bwd[v])) for v in state.timer.points}
            for d, pairs in state.totals.items():
                totals[(d, state.b)] = pairs
        del states
    return LockstepTimings(out, totals)


def time_layers_at_sizes(
    data: dict[str, Any], graph_path: str, sizes: Sequence[int], threads: int = 1, repeats: int = 5, seed: int = 0
) -> tuple[dict[int, dict[str, tuple[float, float]]], float, dict[str, float]]:
    """:func:`time_layers_by_size` as (times, optimizer seconds per parameter tensor, per node the largest over the
    sizes of the saved bytes per sample: an upper bound at every size timed)."""
    got = time_layers_by_size(data, graph_path, sizes, threads, repeats, seed)
    saved: dict[str, float] = {}
    for per_node in got.saved_bytes_per_sample.values():
        for v, x in per_node.items():
            saved[v] = max(saved.get(v, 0.0), x)
    return got.times, got.optimizer_s_per_param_tensor, saved


# -- the plan's inputs to the formula ----------------------------------------------------------------


@dataclass(frozen=True)
class LinkFit:
    """What the workers measure in their own groups before the plan's steps.

    ``alpha_s + bytes * beta_s_per_byte`` of gloo's send/recv (one way) and all-reduce (the whole operation,
    2 ranks); ``empty_step_s``: the plan's shape run with a tiny linear module per stage (:func:`empty_step`).
    """

    p2p_alpha_s: float
    p2p_beta_s_per_byte: float
    allreduce_alpha_s: float
    allreduce_beta_s_per_byte: float
    empty_step_s: float = 0.0


def _split_share(ops: Sequence[Any], roles: Sequence[str], model: Any, profile: Any) -> float:
    """The share of a layer's time in its split (column / row / inner) operators, by the profile's roofline (one sample)."""
    total = split = 0.0
    for op, role in zip(ops, roles):
        t = op_times(op, model.settings, profile)
        total += t.forward_s + t.backward_s
        if role in ("column", "row", "inner"):  # as the planner prices it (joint/run_split.py): inner ops run on shares
            split += t.forward_s + t.backward_s
    return split / total if total > 0 else 0.0


def planned_ddp_in_step(spec: RunSpec) -> float:
    """``rho(d, b)`` of the plan's shape as its planner calibrated it (the plan file's ``cost_model.
    ddp_in_step_s_per_byte``, :mod:`milp_partition.costmodel`): what DDP's all-reduce costs a step beyond gloo's idle
    fit, per parameter byte; 0 where the plan records none (a plan of another objective, or no calibration)."""
    import json

    _, d, _ = spec.shape
    if d <= 1 or not spec.plan_path:
        return 0.0
    try:
        with open(spec.plan_path) as fh:
            table = json.load(fh).get("cost_model", {}).get("ddp_in_step_s_per_byte") or ()
        found = [float(x) for dd, b, x in table if (int(dd), int(b)) == (d, spec.microbatch_size)]
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0
    return found[0] if found else 0.0


def planned_split_times(spec: RunSpec) -> dict[str, tuple[float, float]]:
    """``f_v(b, t)``, ``g_v(b, t)`` per node at the plan's tensor-parallel degree ``t > 1`` and micro-batch size ``b`` as
    its planner's calibration timed them split on the ``t``-rank mesh (the plan file's ``cost_model.layer_times.
    split_times_tp``, :mod:`milp_partition.run.tp_timed`); empty at ``t = 1`` or where the plan records none (a plan of
    another objective, one calibrated before they were timed, or a size not timed)."""
    import json

    t = spec.shape[2]
    if t <= 1 or not spec.plan_path:
        return {}
    try:
        with open(spec.plan_path) as fh:
            timed = json.load(fh).get("cost_model", {}).get("layer_times", {}) or {}
        table = (timed.get("split_times_tp") or {}).get(str(t), {}).get(str(spec.microbatch_size), {})
        return {str(v): (float(fg[0]), float(fg[1])) for v, fg in table.items()}
    except (OSError, ValueError, TypeError, AttributeError, IndexError):
        return {}


def planned_in_step_factors(spec: RunSpec) -> tuple[float, float]:
    """``(kappa_F, kappa_B)`` of a one-rank plan at its micro-batch size as its planner calibrated them (the plan file's
    ``cost_model.in_step_factors``, :mod:`milp_partition.run.inrun`): the passes inside ``run``'s step over the layer
    timer's; ``(1, 1)`` for a plan of several ranks (their layers are timed in step, not scaled) or where the plan records
    none (another objective, no calibration, a size not calibrated)."""
    import json

    if spec.shape != (1, 1, 1) or not spec.plan_path:
        return 1.0, 1.0
    try:
        with open(spec.plan_path) as fh:
            table = json.load(fh).get("cost_model", {}).get("in_step_factors") or ()
        found = [(float(kf), float(kb)) for b, kf, kb in table if int(b) == spec.microbatch_size]
    except (OSError, ValueError, TypeError, AttributeError):
        return 1.0, 1.0
    return found[0] if found else (1.0, 1.0)


def predict_step(
    spec: RunSpec,
    layers: LayerProfile,
    costs: TorchCosts,
    links: LinkFit,
    profile: Any | None = None,
    ddp_in_step_s_per_byte: float | None = None,
    split_times: Mapping[str, tuple[float, float]] | None = None,
    in_step_factors: tuple[float, float] | None = None,
) -> StepPrediction:
    """The formula of this module for ``spec`` (see the module docstring).

    ``layers``: the nodes' times at one micro-batch of ``spec.microbatch_size`` samples (the run's :class:`LayerTimer`); ``costs``: DTensor's overheads
    (:func:`calibrate_runtime`); ``links``: gloo's fits in the run's own process group; ``profile``: only
    for the split operators' share of a layer's time (default: the import's); ``ddp_in_step_s_per_byte``: ``rho`` of
    DDP's all-reduce inside a step (default: the plan's own, :func:`planned_ddp_in_step`); ``split_times``: at ``t > 1``
    each node's (forward, backward) seconds split on the ``t``-rank mesh (default: the plan's calibration,
    :func:`planned_split_times`), priced as they are in place of the analytic split of the run's own unsplit timing
    (their DTensor hooks and all-reduces are in them; ``run`` then measures its ``E`` with nothing split);
    ``in_step_factors``: ``(kappa_F, kappa_B)`` that scale a one-rank plan's layers to the passes inside the step
    (default: the plan's own, :func:`planned_in_step_factors`).
    """
    rho = planned_ddp_in_step(spec) if ddp_in_step_s_per_byte is None else ddp_in_step_s_per_byte
    timed_split = planned_split_times(spec) if split_times is None else split_times
    kappa_f, kappa_b = planned_in_step_factors(spec) if in_step_factors is None else in_step_factors
    model = read_layers(spec.graph, spec.graph_path)
    if profile is None:
        try:
            profile = load_profile_spec(model.profile or "H100")
        except (InputError, OSError):  # a profile path relative to where the import ran: only the split share needs it
            profile = load_profile_spec("H100")
    batch = float(model.batch_size or 1) / spec.microbatch_size  # the import's bytes / batch: one micro-batch's
    successors = {u for u, _, _ in model.edges}
    S, D, T = spec.shape
    # with E measured, each all-reduce's latency is in it (the empty plan has the same pairs): bytes only here
    ar_alpha = 0.0 if links.empty_step_s > 0 else links.allreduce_alpha_s
    stages: list[StageTimes] = []
    dtensor_parts: list[tuple[float, float]] = []  # per stage: DTensor's part per micro-batch, and in the optimizer step
    for q, st in enumerate(spec.stages):
        fwd = bwd = 0.0
        dtensor_mb = 0.0
        param_bytes = 0.0
        param_tensors = 0
        dtensor_tensors = 0
        for v in st.nodes:
            f_v, b_v = kappa_f * layers.forward_s.get(v, 0.0), kappa_b * layers.backward_s.get(v, 0.0)
            if T > 1 and v in timed_split:  # as the planner's calibration timed it split (nothing to add)
                f_v, b_v = timed_split[v]
            if v not in model.layers:
                fwd, bwd = fwd + f_v, bwd + b_v
                continue
            _, ops = model.layers[v]
            roles: Sequence[str] = ("replicated",) * len(ops)
            if T > 1:
                split = split_layer(ops, model.modules, T, last_layer=v not in successors)
                roles = split.roles
            if T > 1 and v not in timed_split:
                phi = _split_share(ops, roles, model, profile)
                f_v, b_v = split_compute_s(f_v, phi, T), split_compute_s(b_v, phi, T)
                f_v += sum(allreduce_s(x / batch, T, ar_alpha, links.allreduce_beta_s_per_byte) for x in split.allreduce_fw_bytes)
                b_v += sum(allreduce_s(x / batch, T, ar_alpha, links.allreduce_beta_s_per_byte) for x in split.allreduce_bw_bytes)
                n_split = sum(1 for op, r in zip(ops, roles) if r in ("column", "row") and op.param_bytes > 0)
                if links.empty_step_s <= 0:  # else DTensor's hooks are in E, run with as many split pairs
                    f_v += n_split * costs.dtensor_module_s / 2
                    b_v += n_split * costs.dtensor_module_s / 2
                    dtensor_mb += n_split * costs.dtensor_module_s * (1.5 if v in st.recomputed else 1.0)
            if v in st.recomputed:
                b_v += f_v
            fwd, bwd = fwd + f_v, bwd + b_v
            for op, role in zip(ops, roles):
                if op.param_bytes > 0:  # weight and bias (an embedding: its table)
                    n = 1 if "embedding" in op.op_type.lower() else 2
                    param_tensors += n
                    dtensor_tensors += n if role in ("column", "row") else 0
                    param_bytes += op.param_bytes / (T if role in ("column", "row") else 1)
        send = 0.0
        if q < S - 1:
            here = set(st.nodes)
            nbytes = sum(b for u, w, b in model.edges if u in here and w not in here) / batch
            # (the latency of each message is in the empty plan's step when it was measured)
            send = message_s(nbytes, 0.0 if links.empty_step_s > 0 else links.p2p_alpha_s, links.p2p_beta_s_per_byte)
        # the empty plan's DDP all-reduces one bucket: that latency is in E when E was measured
        allreduce = ddp_allreduce_s(
            param_bytes,
            D,
            links.allreduce_alpha_s,
            links.allreduce_beta_s_per_byte,
            DDP_BUCKET_BYTES,
            int(links.empty_step_s > 0),
            rho if T == 1 else 0.0,  # measured for DDP (t = 1); the tensor-parallel plans all-reduce by hand
        )
        optimizer = optimizer_step_s(param_tensors, param_bytes, layers.optimizer_s_per_param_tensor)
        optimizer += dtensor_tensors * costs.dtensor_optimizer_tensor_s
        stages.append(StageTimes(fwd, bwd, send, allreduce, optimizer))
        dtensor_parts.append((dtensor_mb, dtensor_tensors * costs.dtensor_optimizer_tensor_s))
    pred = step_time(stages, max(spec.microbatches // D, 1), links.empty_step_s)
    return StepPrediction(
        pred.step_s,
        pred.pipeline_s,
        pred.bottleneck_stage,
        pred.stages,
        pred.microbatches_per_replica,
        {
            **asdict(costs),
            **asdict(links),
            "layer_profile_threads": layers.threads,
            "ddp_in_step_s_per_byte": rho,
            "in_step_factors": [kappa_f, kappa_b],
            # DTensor's overheads on the bottleneck stage over the step (a part of step_s, for the report)
            "dtensor_step_s": pred.microbatches_per_replica * dtensor_parts[pred.bottleneck_stage][0]
            + dtensor_parts[pred.bottleneck_stage][1],
        },
    )


def is_cuda(device: Any) -> bool:
    """Whether ``device`` (a :class:`torch.device`, its name, or ``None`` for the CPU) is a GPU."""
    import torch

    return device is not None and torch.device(device).type == "cuda"


def measure_links(rank: int, sizes: tuple[int, int] = (4096, 4 << 20), repeats: int = 9, device: Any = None) -> LinkFit:
    """The default group's send/recv (half a ping-pong between ranks 0 and 1) and all-reduce, fitted on two sizes (gloo's
    on the CPU; with ``device`` a GPU, nccl's on tensors there, each timing after the GPU's queued kernels).

    Collective: every rank of the default process group calls it; ranks above 1 only join the all-reduces.  With one
    rank there is no peer: the ping is skipped (its fit is zero; a one-device plan sends nothing).
    """
    import torch
    import torch.distributed as dist

    peer = dist.get_world_size() > 1
    cuda = is_cuda(device)

    def timed(fn: Any) -> float:
        samples = []
        for _ in range(repeats + 1):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            if cuda:
                torch.cuda.synchronize(device)
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples[1:])

    p2p: list[float] = []
    ar: list[float] = []
    for size in sizes:
        x = torch.zeros(size // 4, device=device)  # on the GPU where the run has one (nccl moves its tensors)

        def ping(x: Any = x) -> None:
            if not peer:
                return
            if rank == 0:
                dist.send(x, 1)
                dist.recv(x, 1)
            elif rank == 1:
                dist.recv(x, 0)
                dist.send(x, 0)

        p2p.append(timed(ping) / 2.0)
        ar.append(timed(lambda x=x: dist.all_reduce(x)))

    def fit(t: list[float]) -> tuple[float, float]:
        beta = max((t[1] - t[0]) / (sizes[1] - sizes[0]), 0.0)
        return max(t[0] - sizes[0] * beta, 0.0), beta

    return LinkFit(*fit(p2p), *fit(ar))


def combine(ranks: Sequence[dict[str, Any]]) -> tuple[LayerProfile, TorchCosts, LinkFit]:
    """The ranks' measurements (``rank*.json``: ``layer_profile``, ``costs``, ``links``) as one: means over the ranks."""
    profiles = [r["layer_profile"] for r in ranks]

    def mean(values: Sequence[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    nodes = list(profiles[0]["forward_s"])
    layers = LayerProfile(
        {v: mean([p["forward_s"].get(v, 0.0) for p in profiles]) for v in nodes},
        {v: mean([p["backward_s"].get(v, 0.0) for p in profiles]) for v in nodes},
        mean([p["optimizer_s_per_param_tensor"] for p in profiles]),
        int(profiles[0].get("threads", 1)),
    )
    costs = TorchCosts(**{k: mean([r["costs"][k] for r in ranks]) for k in ranks[0]["costs"]})
    links = LinkFit(**{k: mean([r["links"][k] for r in ranks]) for k in ranks[0]["links"]})
    return layers, costs, links


class EmptyStep:
    """The step of a plan's schedule with nothing to compute (:func:`empty_step`), built once and stepped round by round
    (:meth:`one`); :attr:`samples` holds the recorded steps' wall seconds."""

    def __init__(
        self,
        stages: int,
        stage: int,
        n_micro: int,
        device: Any,
        pp_group: Any,
        dp_group: Any,
        tp_mesh: Any = None,
        tp_pairs: int = 0,
    ) -> None:
        import torch
        from torch import nn
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        torch.manual_seed(0)
        module: Any = nn.Linear(8, 8).to(device)
        if tp_mesh is not None and tp_pairs > 0:
            from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

            module = nn.Sequential(*[nn.Linear(8, 8) for _ in range(2 * tp_pairs)]).to(device)
            plan: dict[str, Any] = {str(i): ColwiseParallel() if i % 2 == 0 else RowwiseParallel() for i in range(2 * tp_pairs)}
            parallelize_module(module, tp_mesh, plan)
        if dp_group is not None:
            from torch.nn.parallel import DistributedDataParallel

            module = DistributedDataParallel(module, process_group=dp_group)

        def ce(out: Any, tgt: Any) -> Any:
            return nn.functional.cross_entropy(out.reshape(-1, 8), tgt.reshape(-1))

        self.stages, self.stage = stages, stage
        self.schedule = Schedule1F1B(
            PipelineStage(module, stage, stages, device, group=pp_group), n_micro, loss_fn=ce, scale_grads=True
        )
        self.xs = torch.randn(n_micro, 4, 8, device=device)
        self.target = torch.randint(0, 8, (n_micro, 4), device=device)
        self.samples: list[float] = []

    def one(self, record: bool = True) -> None:
        """One step between two barriers (collective over the plan's ranks); its seconds kept with ``record``."""
        import torch.distributed as dist

        dist.barrier()
        t0 = time.perf_counter()
        if self.stages == 1:
            self.schedule.step(self.xs, target=self.target, losses=[])
        elif self.stage == 0:
            self.schedule.step(self.xs)
        elif self.stage == self.stages - 1:
            self.schedule.step(target=self.target, losses=[])
        else:
            self.schedule.step()
        dist.barrier()
        if record:
            self.samples.append(time.perf_counter() - t0)

    def median_s(self) -> float:
        return statistics.median(self.samples)


def empty_step(
    stages: int,
    stage: int,
    n_micro: int,
    device: Any,
    pp_group: Any,
    dp_group: Any,
    tp_mesh: Any = None,
    tp_pairs: int = 0,
    repeats: int = 5,
) -> float:
    """The step of the plan's schedule with nothing to compute: ``Schedule1F1B`` over ``n_micro`` micro-batches on the
    run's pipeline group, a small linear module per stage (DDP over ``dp_group`` if given; with ``tp_mesh``,
    ``tp_pairs`` column/row-parallel pairs of small linear modules, as many as the stage splits, so that
    DTensor's overheads and each all-reduce's latency come in the plan's pattern); median wall time of ``repeats``
    steps after one of warm-up (:class:`EmptyStep`).

    Collective over the run's ranks. What it measures is the runtime's own cost, the ``E`` of :func:`step_time`.
    """
    step = EmptyStep(stages, stage, n_micro, device, pp_group, dp_group, tp_mesh, tp_pairs)
    step.one(record=False)
    for _ in range(repeats):
        step.one()
    return step.median_s()
