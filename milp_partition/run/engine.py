"""The torch side of ``milp-partition run``: one worker per device, and the single-process reference.

Everything distributed is torch's own: the process group (gloo on CPU; with CUDA nccl, gloo for CPU tensors) over a
:class:`torch.distributed.FileStore`, a ``(pp, dp, tp)`` :class:`~torch.distributed.device_mesh.DeviceMesh`,
``torch.distributed.pipelining`` (``pipeline()`` with ``SplitPoint.BEGINNING`` at each later stage's first
module, :class:`PipelineStage`, :class:`Schedule1F1B` over the plan's micro-batches, gradients scaled by
their number), :class:`~torch.nn.parallel.DistributedDataParallel` over the ``dp`` dimension,
``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel`` on the linear (and token-embedding)
modules the planner split (:func:`milp_partition.joint.megatron.split_layer`'s roles), and
``checkpoint_wrapper`` (``torch.utils.checkpoint``) on the recomputed layers.

The one piece of model code here: a fused-QKV attention module (one with ``heads`` and a ``qkv`` linear,
as in :mod:`milp_partition.importers.models`) gets its QKV rows ordered per rank (Megatron's layout) and
a forward that reads its local heads from the tensor's width, so that column-parallel QKV is correct.

Torch is imported inside the functions, so :mod:`milp_partition.run` imports without it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import statistics
import threading
import time
import warnings
from typing import Any

from milp_partition.io.atomic import write_atomic
from milp_partition.io.imported_layers import read_layers
from milp_partition.joint.megatron import split_layer
from milp_partition.run.layout import RankLayout
from milp_partition.run.mixed import MixedRank, allreduce_gradients, stage_graph
from milp_partition.run.model import batch, batch_on, build_model, loss_fn, optimizer
from milp_partition.run.pinning import pin_rank
from milp_partition.run.predict import (
    LayerTimer,
    calibrate_runtime,
    empty_step,
    is_cuda,
    measure_links,
    planned_split_times,
)
from milp_partition.run.schedclock import StepSched
from milp_partition.run.spec import RunSpec

__all__ = ["batch", "build_model", "loss_fn", "optimizer", "reference", "summarise", "worker"]


def set_parent_death_signal() -> None:
    """Linux: this process gets SIGTERM when its parent dies (so no worker outlives the launcher)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class PeakRss:
    """Samples this process's resident memory every ``interval_s`` in a thread; ``peak`` is the largest seen."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, _rss_bytes())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


class SavedActivations:
    """The bytes autograd holds for the backward pass, live and at their peak (``saved_tensors_hooks``; each storage once).

    Parameters (and their views) saved by an operator are not counted: they are the weights, held anyway.
    Inside a recomputed (``checkpoint_wrapper``) layer its own hooks win, so only what it keeps shows.
    The hooks run Python for every tensor autograd saves, so a run counts on its first two steps only (:meth:`during`):
    on every step they made the passes 1.15-1.85x slower than training runs (docs/import.md, the passes inside a run).
    Two, not one: what a step leaves live into the next (the MLP's first layer's saved input, one batch's 1 KiB) is
    part of the peak from the second step on.
    """

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.live: dict[int, list[int]] = {}
        self.bytes = 0
        self.peak = 0

    def _drop(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.bytes -= entry[1]
            del self.live[key]

    def pack(self, t: Any) -> Any:
        import weakref

        local = t.to_local() if hasattr(t, "to_local") else t
        storage = local.untyped_storage()
        key = storage.data_ptr()
        if key in self.exclude or storage.nbytes() == 0:
            return t
        entry = self.live.setdefault(key, [0, storage.nbytes()])
        if entry[0] == 0:
            self.bytes += entry[1]
            self.peak = max(self.peak, self.bytes)
        entry[0] += 1

        class Held:
            __slots__ = ("__weakref__", "tensor")

            def __init__(self, tensor: Any) -> None:
                self.tensor = tensor

        held = Held(t)
        weakref.finalize(held, self._drop, key)
        return held

    @staticmethod
    def unpack(held: Any) -> Any:
        return getattr(held, "tensor", held)

    def during(self, step: int) -> Any:
        """The context of step ``step``'s passes: the counting hooks on the first two steps (``0``, the warm-up, and
        ``1``: every later step saves what step 1 saves, with what step 0 left live), nothing on the others (they run
        as training runs; with one warm-up step, 1 of the timed steps carries the hooks)."""
        import contextlib

        import torch

        if step < 2:
            return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        return contextlib.nullcontext()


def tensor_bytes_of(params: list[Any], opt: Any) -> tuple[int, int, int]:
    """Bytes of this rank's parameters, their gradients and the optimizer's state (a DTensor: its local shard)."""

    def nbytes(t: Any) -> int:
        local = t.to_local() if hasattr(t, "to_local") else t
        return int(local.numel() * local.element_size())

    weights = sum(nbytes(p) for p in params)
    grads = sum(nbytes(p) for p in params if p.grad is not None)
    state = sum(nbytes(v) for st in opt.state.values() for v in st.values() if hasattr(v, "numel") and v.dim() > 0)
    return weights, grads, state


def uses_cuda(world: int) -> bool:
    """Whether a run of ``world`` ranks goes on GPUs: CUDA is there and has a GPU per rank (nccl refuses two ranks
    on one GPU); else every rank runs on the CPU with gloo."""
    import torch

    return bool(torch.cuda.is_available()) and torch.cuda.device_count() >= world


def reference(spec: RunSpec, steps: int, seed: int, device: Any = None) -> dict[str, Any]:
    """The same steps in one process on the whole (global, ``N b``) batch, on ``device`` (default the CPU): per-step losses and times."""
    import torch

    model = build_model(spec, seed)
    batches = [batch(spec, model, k, seed) for k in range(steps)]  # on the CPU, before the model moves (as the workers)
    cuda = is_cuda(device)
    if device is not None:
        model.to(device)
    opt = optimizer(spec, model.parameters())
    losses: list[float] = []
    times: list[float] = []
    for args, kwargs, target in batches:
        if device is not None:
            args, kwargs, target = batch_on(device, args, kwargs, target)
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        loss = loss_fn(model(*args, **kwargs), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach().to(torch.float64)))
    return {"losses": losses, "step_s": times}


# -- tensor parallelism ----------------------------------------------------------------------------


def tp_roles(spec: RunSpec, nodes: tuple[str, ...], t: int) -> dict[str, str]:
    """Module path -> ``column``, ``column-gather`` (no row partner: the LM head) or ``row`` for the planner's split modules."""
    model = read_layers(spec.graph, spec.graph_path)
    successors = {u for u, _, _ in model.edges}
    roles: dict[str, str] = {}
    for v in nodes:
        if v not in model.layers:
            continue
        _, ops = model.layers[v]
        split = split_layer(ops, model.modules, t, last_layer=v not in successors)
        found = [
            (op.module_path, role)
            for op, role in zip(ops, split.roles)
            if role in ("column", "row") and model.modules.get(op.module_path, {}).get("type") in ("Linear", "Embedding")
        ]
        for q, (path, role) in enumerate(found):
            # a column layer with no row layer after it in its layer (the LM head) gathers its output
            if role == "column" and not any(r == "row" for _, r in found[q + 1 :]):
                role = "column-gather"
            roles[path] = role
    return roles


def _tp_attention_forward(self: Any, x: Any) -> Any:
    """A fused-QKV causal attention on this rank's heads (the width of its share of the QKV output)."""
    import torch

    b, s, _ = x.shape
    hd = self._tp_head_dim
    qkv = self.qkv(x)
    h = qkv.shape[-1] // (3 * hd)
    q, k, v = qkv.reshape(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    att = att.masked_fill(~self.mask[:s, :s], float("-inf"))
    y = torch.matmul(torch.softmax(att, dim=-1), v).transpose(1, 2).reshape(b, s, h * hd)
    return self.proj(y)


def _prepare_fused_attention(module: Any, t: int) -> None:
    """Order the QKV rows rank by rank (q, k, v of rank 0's heads, then rank 1's, ...) and swap in the TP forward."""
    import types

    import torch

    width = module.qkv.out_features // 3
    heads = int(module.heads)
    share = width // t
    order = torch.cat(
        [torch.arange(part * width + r * share, part * width + (r + 1) * share) for r in range(t) for part in range(3)]
    )
    with torch.no_grad():
        module.qkv.weight.copy_(module.qkv.weight[order])
        if module.qkv.bias is not None:
            module.qkv.bias.copy_(module.qkv.bias[order])
    module._tp_head_dim = width // heads
    module.forward = types.MethodType(_tp_attention_forward, module)


def apply_tensor_parallel(module: Any, roles: dict[str, str], mesh: Any, t: int) -> list[str]:
    """``parallelize_module`` with the planner's roles; returns notes on what was not split as planned."""
    from torch import nn
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    notes: list[str] = []
    present = dict(module.named_modules())
    for path, sub in present.items():
        if hasattr(sub, "heads") and isinstance(getattr(sub, "qkv", None), nn.Linear) and f"{path}.qkv".lstrip(".") in roles:
            _prepare_fused_attention(sub, t)
    plan: dict[str, Any] = {}
    for path, role in roles.items():
        sub = present.get(path)
        if sub is None:
            notes.append(f"{path}: not in this stage's module")
            continue
        if isinstance(sub, nn.Embedding):
            plan[path] = RowwiseParallel(input_layouts=Replicate())
        elif role == "row":
            plan[path] = RowwiseParallel()
        elif role == "column":
            plan[path] = ColwiseParallel()
        else:  # the logits are gathered: the loss here is no vocabulary-parallel cross-entropy
            plan[path] = ColwiseParallel(output_layouts=Replicate())
    parallelize_module(module, mesh, plan)
    return notes


# -- one worker ------------------------------------------------------------------------------------


def _split_points(spec: RunSpec) -> tuple[dict[str, Any], list[str]]:
    """``SplitPoint.BEGINNING`` at the first module (in execution order) of every stage after the first."""
    from torch.distributed.pipelining import SplitPoint

    notes: list[str] = []
    points: dict[str, Any] = {}
    order = {v: i for i, v in enumerate(spec.node_order)}
    for q, st in enumerate(spec.stages[1:], start=2):
        first = min((v for v in st.nodes if not v.startswith("top")), key=lambda v: order.get(v, 0), default=None)
        if first is None:
            raise RuntimeError(f"stage {q} holds no module to split at")
        before = [v for v in spec.stages[q - 2].nodes if order.get(v, 0) > order[first]]
        if before:
            notes.append(f"stage {q - 1}'s {before} run after the cut at {first} (the run cuts in execution order)")
        points[first] = SplitPoint.BEGINNING
    return points, notes


def worker(
    rank: int,
    world: int,
    store_path: str,
    spec: RunSpec,
    steps: int,
    seed: int,
    threads: int,
    out_dir: str,
    cuda: bool = False,
    pin: bool = True,
) -> None:
    """One rank: build the model, split, parallelise, run ``steps`` steps, write ``rank{rank}.json`` to ``out_dir``.

    ``cuda``: rank ``r`` runs on GPU ``r`` (nccl takes one rank per GPU; :func:`uses_cuda` decides), else on the CPU.
    ``pin``: on the CPU, the rank on cores of its own where the machine has them (:mod:`.pinning`; ``run --no-pin``).
    A plan whose stages share one (d, t) runs on a ``(pp, dp, tp)`` mesh with ``torch.distributed.pipelining``
    (:func:`_mesh_rank`); any other on :mod:`milp_partition.run.mixed`'s schedule (:func:`_mixed_rank`).
    """
    set_parent_death_signal()
    cores = pin_rank(rank, world, threads) if pin and not cuda else None  # before torch starts its threads
    import json

    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"  # with CUDA: nccl for the GPU's tensors, gloo for the CPU's
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    try:
        # the prediction's inputs, measured here under the run's own conditions (every rank at once, on
        # the same cores), before the plan's steps: gloo's latency and bandwidth in this group, the plan's shape
        # with nothing to compute (in _mesh_rank), the whole
        # model's layers at one sample, and torch's overheads (DTensor, the schedule) on tiny modules
        links = measure_links(rank, device=device)
        own_group = [dist.new_group([r]) for r in range(world)][rank]
        timer = LayerTimer(
            spec, threads, seed, device=device if cuda else None, samples=spec.microbatch_size
        )  # then one pass before each step (below)
        costs = calibrate_runtime(threads, group=own_group)
        notes: list[str] = []
        run = (_mesh_rank if spec.uniform else _mixed_rank)(spec, rank, steps, seed, timer, device, notes)
        links = dataclasses.replace(links, empty_step_s=run.empty_step_s)
        stage_spec = spec.stages[run.stage]
        result = {
            "rank": rank,
            "pp": run.stage,
            "dp": run.replica,
            "tp": run.tp_index,
            "losses": run.losses,
            "step_s": run.times,
            "compute_s": run.compute_s,
            "step_cpu_s": run.sched.cpu_s,
            "step_runqueue_wait_s": run.sched.runqueue_wait_s,
            "peak_memory_bytes": int(run.peak_bytes) if cuda else int(sum(run.held) + run.saved_peak),
            "memory_measure": "torch.cuda.max_memory_allocated"
            if cuda
            else "tensors: weights + gradients + optimizer state + peak saved activations (saved_tensors_hooks)",
            "predicted_memory_bytes": stage_spec.predicted_memory_bytes,
            "tensor_memory": {
                "weights": run.held[0],
                "gradients": run.held[1],
                "optimizer_state": run.held[2],
                "saved_activations_peak": run.saved_peak,
                "total": sum(run.held) + run.saved_peak,
            },
            "rss_peak_bytes": int(run.rss_peak),
            "links": dataclasses.asdict(links),
            "layer_profile": timer.profile().to_dict(),
            "costs": dataclasses.asdict(costs),
            "backend": backend,
            "cores": cores,
            "notes": notes,
        }
        write_atomic(os.path.join(out_dir, f"rank{rank}.json"), json.dumps(result), what="the rank's result")
    finally:
        dist.destroy_process_group()


class ChunkClock:
    """The seconds a :class:`~torch.distributed.pipelining.PipelineStage` spends in its forward and backward passes:
    wraps the stage's ``forward_one_chunk`` and ``backward_one_chunk`` (two clock reads each); :meth:`take` returns the
    seconds since the last call and starts again.  What a step spends outside them is the schedule's own: waiting for
    the other stages' messages, the sends, the loss, the optimizer step, the barriers.  On a GPU: the host's time in
    the calls (the kernels they queue may finish later)."""

    def __init__(self, stage: Any) -> None:
        self.seconds = 0.0
        self.per_step: list[float] = []  # filled by the step loop (:func:`_train_steps`)
        for name in ("forward_one_chunk", "backward_one_chunk"):
            setattr(stage, name, self._timed(getattr(stage, name)))

    def _timed(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        return timed

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


@dataclasses.dataclass(frozen=True)
class RankRun:
    """What one rank's steps gave: its place, per-step losses (last stage) and seconds, memory, the empty step."""

    stage: int
    replica: int
    tp_index: int
    losses: list[float]
    times: list[float]
    held: tuple[int, int, int]  # weights, gradients, optimizer state after the last step (bytes)
    saved_peak: int  # peak bytes of the activations autograd saved
    rss_peak: int  # the process's resident memory over the steps, above where it was before the model
    peak_bytes: int  # torch.cuda.max_memory_allocated on a GPU, else 0
    empty_step_s: float  # the plan's shape with nothing to compute (0: not measured)
    #: per step, the seconds this rank spent in its stage's forward and backward passes (``Schedule1F1B``'s
    #: ``forward_one_chunk`` and ``backward_one_chunk``, DDP's gradient sync in the last one); empty where not timed
    compute_s: list[float] = dataclasses.field(default_factory=list)
    #: per step, this rank's main thread on a core and runnable but waiting for one (:mod:`.schedclock`)
    sched: StepSched = dataclasses.field(default_factory=StepSched)


def _mesh_rank(spec: RunSpec, rank: int, steps: int, seed: int, timer: Any, device: Any, notes: list[str]) -> RankRun:
    """A plan with one (d, t) for every stage: a ``(pp, dp, tp)`` mesh, ``pipelining``'s ``Schedule1F1B``."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    cuda = device.type == "cuda"
    S, D, T = spec.shape
    mesh = init_device_mesh(device.type, (S, D, T), mesh_dim_names=("pp", "dp", "tp"))
    pp, dp = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    # DDP takes no DTensor parameters: with tensor parallelism the gradients are all-reduced by hand (and so in E)
    dp_group = mesh["dp"].get_group() if D > 1 else None
    tp_pairs = (len(tp_roles(spec, spec.stages[pp].nodes, T)) + 1) // 2 if T > 1 else 0
    if planned_split_times(spec):  # the prediction reads the layers as timed split, DTensor's hooks in them: E without
        tp_pairs = 0
    empty = empty_step(
        S, pp, spec.microbatches // D, device, mesh["pp"].get_group(), dp_group if T == 1 else None,
        mesh["tp"] if T > 1 else None, tp_pairs,
    )  # fmt: skip
    base_rss = _rss_bytes()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    model = build_model(spec, seed)
    batches = [batch(spec, model, k, seed) for k in range(steps)]  # every step's data, before the split
    args0, kwargs0, _ = batches[0]
    module, params = _stage_module(spec, model, pp, args0, kwargs0, mesh, device, notes)
    del model  # only this stage's module stays
    n_micro = spec.microbatches // D  # each of b samples: Schedule1F1B splits the replica's n_micro b samples
    stage = PipelineStage(module, pp, S, device, group=mesh["pp"].get_group())
    clock = ChunkClock(stage)
    schedule = Schedule1F1B(stage, n_micro, loss_fn=loss_fn, scale_grads=True)
    opt = optimizer(spec, params)
    local_ptrs = {(p.to_local() if hasattr(p, "to_local") else p).untyped_storage().data_ptr() for p in params}
    saved = SavedActivations(local_ptrs)
    sched = StepSched()
    with PeakRss() as rss:
        losses, times, held = _train_steps(
            schedule, opt, params, batches, timer, saved, mesh, device, n_micro * spec.microbatch_size, clock, sched
        )
    peak = torch.cuda.max_memory_allocated(device) if cuda else 0
    run = RankRun(pp, dp, mesh["tp"].get_local_rank(), losses, times, held, saved.peak, rss.peak - base_rss, peak, empty)
    return dataclasses.replace(run, compute_s=clock.per_step, sched=sched)


def _eager_modules(module: Any, model: Any, nodes: tuple[str, ...]) -> None:
    """Put ``model``'s own module back at each of the stage's node paths in ``module`` (a stage of ``pipeline()``).

    ``pipeline()`` traces every module into an ``InterpreterModule`` (its fx graph, run operator by operator in
    Python): no ``nn.Linear`` for ``parallelize_module`` (which refuses it), no ``heads`` for the fused attention, and
    not the eager modules the layer timer timed. The stage's graph calls each node's module by its path, with the
    same inputs, so the model's own module computes the same.
    """
    present = dict(module.named_modules())
    for v in nodes:
        if not v or v not in present:
            continue
        try:
            eager = model.get_submodule(v)
        except AttributeError:
            continue
        if eager is not present[v]:
            module.set_submodule(v, eager)


def _prepare_stage(spec: RunSpec, module: Any, q: int, tp_mesh: Any, device: Any, notes: list[str], model: Any = None) -> Any:
    """Stage ``q``'s module (its nodes' eager modules from ``model`` when it is a ``pipeline()`` stage),
    tensor-parallel over ``tp_mesh``, with its recomputed layers checkpointed, on ``device``.

    The split comes first: the planner's roles name the model's own module paths (``h.2.attn.c_attn``, ``lm_head``),
    which a checkpoint wrapper would move (``h.2._checkpoint_wrapped_module...``) or hide (a recomputed ``nn.Linear``
    is no longer one: ``ColwiseParallel`` refused it); ``parallelize_module`` keeps each module object, so the layers
    to recompute are still found by identity after it."""
    stage_spec = spec.stages[q]
    if model is not None and module is not model:
        _eager_modules(module, model, stage_spec.nodes)
    wanted = {id(m) for p, m in module.named_modules() if p in set(stage_spec.recomputed)}
    t = stage_spec.tensor_parallel
    if t > 1:
        notes += apply_tensor_parallel(module, tp_roles(spec, stage_spec.nodes, t), tp_mesh, t)
    if stage_spec.recomputed:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

        apply_activation_checkpointing(module, check_fn=lambda m: id(m) in wanted)
    return module.to(device)


#: The message of torch's FutureWarning from inside ``pipeline()`` (a regular expression, matched at its start).
LEAFSPEC_WARNING = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


def traced_pipeline(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None, points: dict[str, Any]) -> Any:
    """torch's ``pipeline()`` of ``model`` traced on ``args``/``kwargs`` and split at ``points``, without the
    FutureWarning torch 2.13 raises inside it (its traced program is deep-copied and its tree specs warn of their own
    deprecated LeafSpec check, in copyreg: nothing the user or the plan can act on, printed once per rank before)."""
    from torch.distributed.pipelining import pipeline

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LEAFSPEC_WARNING, category=FutureWarning)
        return pipeline(model, args, kwargs, split_spec=points)


def _stage_module(
    spec: RunSpec, model: Any, pp: int, args0: list[Any], kwargs0: dict[str, Any], mesh: Any, device: Any, notes: list[str]
) -> tuple[Any, list[Any]]:
    """This rank's stage of ``model`` (split by ``pipeline()``), checkpointed, tensor-parallel, on ``device``, under DDP.

    Returns the module to schedule and its parameters (before DDP wraps it). With tensor parallelism, DDP (which
    takes no DTensor parameters) is left out: :func:`_train_steps` all-reduces the gradients over ``dp``.
    """
    S, D, T = spec.shape
    if S > 1:
        points, cut_notes = _split_points(spec)
        notes += cut_notes
        b = spec.microbatch_size  # traced on one micro-batch (the stages' shapes are a micro-batch's)
        pipe = traced_pipeline(model, tuple(a[:b] for a in args0), {k: v[:b] for k, v in kwargs0.items()} or None, points)
        module = pipe.get_stage_module(pp)
        del pipe
    else:
        module = model
    module = _prepare_stage(spec, module, pp, mesh["tp"], device, notes, model)
    params = list(module.parameters())
    if D > 1 and T == 1:
        from torch.nn.parallel import DistributedDataParallel

        module = DistributedDataParallel(module, process_group=mesh["dp"].get_group())
    return module, params


def _train_steps(
    schedule: Any,
    opt: Any,
    params: list[Any],
    batches: list[Any],
    timer: Any,
    saved: Any,
    mesh: Any,
    device: Any,
    replica_samples: int,
    clock: ChunkClock | None = None,
    sched: StepSched | None = None,
) -> tuple[list[float], list[float], tuple[int, int, int]]:
    """The plan's steps on this rank: per-step mean loss (last stage), wall seconds, and tensor bytes held at the end.

    ``replica_samples``: the samples of one data-parallel replica per step (its micro-batches times their size); replica
    ``dp`` takes the batch's ``dp``-th slice of that many, and the schedule cuts it into its micro-batches.
    ``clock``: the stage's :class:`ChunkClock`; each step's seconds in its passes go to ``clock.per_step``.
    ``sched``: each step's seconds on a core and waiting for one (this thread's, :mod:`.schedclock`).
    """
    import torch
    import torch.distributed as dist

    cuda = device.type == "cuda"
    S, D, T = mesh["pp"].size(), mesh["dp"].size(), mesh["tp"].size()
    pp, dp = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    steps = len(batches)
    losses: list[float] = []
    times: list[float] = []
    held = (0, 0, 0)
    for k in range(steps):
        timer.sample()
        args, kwargs, target = batches[k]
        lo, hi = dp * replica_samples, (dp + 1) * replica_samples
        args = [a[lo:hi].to(device) for a in args]
        kwargs = {n: v[lo:hi].to(device) for n, v in kwargs.items()}
        mb_losses: list[Any] = []
        dist.barrier()
        if clock is not None:
            clock.take()
        t0 = time.perf_counter()
        if sched is not None:
            sched.start()
        with saved.during(k):
            if S == 1:
                schedule.step(*args, target=target[lo:hi].to(device), losses=mb_losses, **kwargs)
            elif pp == 0:
                schedule.step(*args, **kwargs)
            elif pp == S - 1:
                schedule.step(target=target[lo:hi].to(device), losses=mb_losses)
            else:
                schedule.step()
        if D > 1 and T > 1:
            allreduce_gradients(params, mesh["dp"].get_group(), divide_by=D)
        opt.step()
        if k == steps - 1:
            held = tensor_bytes_of(params, opt)
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier()
        if sched is not None:
            sched.stop()
        times.append(time.perf_counter() - t0)
        if clock is not None:
            clock.per_step.append(clock.take())
        if mb_losses:
            mean = torch.stack([x.detach().to(torch.float64) for x in mb_losses]).mean()
            if D > 1:
                dist.all_reduce(mean, group=mesh["dp"].get_group())
                mean /= D
            losses.append(float(mean))
    return losses, times, held


def _mixed_groups(layout: RankLayout, rank: int, device: Any) -> tuple[Any, Any]:
    """This rank's tensor-parallel mesh (``None`` at t = 1) and data-parallel group (``None`` at d = 1).

    Every rank creates every group, in one order (``new_group`` is collective over the default group).
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    tp_mesh = dp_group = None
    for q, (d, t) in enumerate(layout.degrees):
        if t > 1:
            for r in range(d):
                ranks = layout.ranks(q, r)
                group = dist.new_group(ranks)
                if rank in ranks:
                    tp_mesh = DeviceMesh.from_group(group, device.type)
        if d > 1:
            for ranks in layout.data_groups(q):
                group = dist.new_group(ranks)
                if rank in ranks:
                    dp_group = group
    return tp_mesh, dp_group


def _mixed_rank(spec: RunSpec, rank: int, steps: int, seed: int, timer: Any, device: Any, notes: list[str]) -> RankRun:
    """A plan whose stages have different (d, t): :class:`~milp_partition.run.mixed.MixedRank` on this rank's stage."""
    import torch
    import torch.distributed as dist

    cuda = device.type == "cuda"
    layout = RankLayout(spec.degrees, spec.microbatches)
    place = layout.place(rank)
    tp_mesh, dp_group = _mixed_groups(layout, rank, device)
    base_rss = _rss_bytes()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    model = build_model(spec, seed)
    batches = [batch(spec, model, k, seed) for k in range(steps)]  # every step's data, before the split
    args0, kwargs0, _ = batches[0]
    points, cut_notes = _split_points(spec)
    notes += cut_notes
    b = spec.microbatch_size  # traced and run on one micro-batch of b samples
    pipe = traced_pipeline(model, tuple(a[:b] for a in args0), {k: v[:b] for k, v in kwargs0.items()} or None, points)
    graph, model_output = stage_graph(pipe, [a[:b] for a in args0], {k: v[:b] for k, v in kwargs0.items()})
    module = _prepare_stage(spec, pipe.get_stage_module(place.stage), place.stage, tp_mesh, device, notes, model)
    del model, pipe
    params = list(module.parameters())
    opt = optimizer(spec, params)
    in_flight = [st.microbatches_in_flight or len(spec.stages) - q for q, st in enumerate(spec.stages)]
    runner = MixedRank(layout, place, module, graph, model_output, in_flight, loss_fn, device, b)
    saved = SavedActivations({(p.to_local() if hasattr(p, "to_local") else p).untyped_storage().data_ptr() for p in params})
    last = place.stage == layout.stages - 1
    losses: list[float] = []
    times: list[float] = []
    held = (0, 0, 0)
    sched = StepSched()
    with PeakRss() as rss:
        for k in range(steps):
            timer.sample()
            args, kwargs, target = batches[k]
            dist.barrier()
            t0 = time.perf_counter()
            sched.start()
            with saved.during(k):
                loss = runner.step([*args, *kwargs.values()], target)
            if dp_group is not None:
                allreduce_gradients(params, dp_group)  # each micro-batch's loss was divided by N: a sum
            opt.step()
            if k == steps - 1:
                held = tensor_bytes_of(params, opt)
            opt.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize(device)
            dist.barrier()
            sched.stop()
            times.append(time.perf_counter() - t0)
            if last:
                total = torch.tensor(loss, dtype=torch.float64)
                if dp_group is not None:
                    dist.all_reduce(total, group=dp_group)
                losses.append(float(total))
    peak = torch.cuda.max_memory_allocated(device) if cuda else 0
    notes.append(
        "stages with different degrees: run on milp_partition.run.mixed's 1F1B schedule (point-to-point messages "
        "between stage groups, gradients all-reduced after the backward), not torch.distributed.pipelining"
    )
    run = RankRun(place.stage, place.replica, place.tp_index, losses, times, held, saved.peak, rss.peak - base_rss, peak, 0.0)
    return dataclasses.replace(run, sched=sched)


def step_spread(seconds: list[float]) -> dict[str, float]:
    """The spread of the timed steps (after warm-up): quartiles, extremes, and the interquartile range over the median
    (``iqr_over_median``; 0 with fewer than 2 steps), so that a reader sees when one plan's measured step is noise.

    Quartiles are :func:`statistics.quantiles`' inclusive ones (the median of the lower / upper half, interpolated)."""
    if not seconds:
        return {"min_s": math.nan, "q1_s": math.nan, "q3_s": math.nan, "max_s": math.nan, "iqr_over_median": math.nan}
    if len(seconds) < 2:
        x = seconds[0]
        return {"min_s": x, "q1_s": x, "q3_s": x, "max_s": x, "iqr_over_median": 0.0}
    q1, _, q3 = statistics.quantiles(seconds, n=4, method="inclusive")
    med = statistics.median(seconds)
    return {
        "min_s": min(seconds),
        "q1_s": q1,
        "q3_s": q3,
        "max_s": max(seconds),
        "iqr_over_median": (q3 - q1) / med if med > 0 else math.nan,
    }


#: The share of the measured step a rank may wait for a core before run.json notes that the machine's other work was in
#: the measure (launches of one plan at load 6 differed by 2.4x, the difference all run-queue wait).
WAIT_NOTE_SHARE = 0.05


def waited_note(ranks: list[dict[str, Any]], warmup: int, measured_s: float) -> list[str]:
    """A note when some rank's main thread waited, runnable, for a core another process held for over
    :data:`WAIT_NOTE_SHARE` of the measured step (the median after warm-up of its waits); none otherwise."""
    waits = [(_median_after(r.get("step_runqueue_wait_s"), warmup), r["rank"]) for r in ranks]
    known = [(w, rank) for w, rank in waits if w is not None and w == w]
    if not known or measured_s <= 0:
        return []
    wait, rank = max(known)
    if wait <= WAIT_NOTE_SHARE * measured_s:
        return []
    return [
        f"rank {rank} waited for a core other processes held {100 * wait / measured_s:.0f}% of the measured step "
        f"({wait:.3g} s a step, the median): the step measures this machine's other work too (its peers wait for it "
        "asleep, not counted); run again on idle cores, or take the median of several launches"
    ]


def _median_after(seconds: list[float] | None, warmup: int) -> float | None:
    """The median of ``seconds`` after the first ``warmup`` (all of them when that leaves none); ``None`` when absent."""
    if not seconds:
        return None
    return statistics.median(seconds[warmup:] or seconds)


def summarise(
    spec: RunSpec, ranks: list[dict[str, Any]], ref: dict[str, Any], warmup: int, prediction: dict[str, Any] | None = None
) -> dict[str, Any]:
    """run.json's figures from the ranks' results, the single-process reference and the step's prediction (:mod:`.predict`)."""
    last = [r for r in ranks if r["losses"]]
    losses = last[0]["losses"] if last else []
    ref_losses = ref["losses"]
    diffs = [abs(a - b) / abs(b) if b else abs(a - b) for a, b in zip(losses, ref_losses)]
    per_step = [max(r["step_s"][k] for r in ranks) for k in range(len(ranks[0]["step_s"]))]
    timed = per_step[warmup:] or per_step
    measured = statistics.median(timed)
    predicted = float((prediction or {}).get("step_s", spec.predicted_step_s))
    s, d, t = spec.shape
    return {
        "plan": spec.plan_path,
        "graph": spec.graph_path,
        "model": spec.model,
        "shape": {"stages": s, "data_parallel": d, "tensor_parallel": t},  # the first stage's degrees
        "stage_degrees": [{"data_parallel": d_q, "tensor_parallel": t_q} for d_q, t_q in spec.degrees],
        "ranks": len(ranks),
        "backend": ranks[0]["backend"],
        "microbatches": spec.microbatches,
        "steps": len(per_step),
        "warmup_steps": warmup,
        "losses": losses,
        "single_process_losses": ref_losses,
        "loss_max_rel_diff": max(diffs) if diffs else math.nan,
        "step_s": per_step,
        "single_process_step_s": ref["step_s"],
        "measured_step_s": measured,
        "measured_step_spread": step_spread(timed),
        # per rank (rank order), the median after warm-up of the seconds its stage spent in its forward and backward
        # passes in a step (ChunkClock; None where not timed: stages of different degrees)
        "measured_compute_s": [
            statistics.median(r["compute_s"][warmup:] or r["compute_s"]) if r.get("compute_s") else None
            for r in sorted(ranks, key=lambda r: r["rank"])
        ],
        # per rank, the median after warm-up of its main thread's seconds in a step on a core and runnable but
        # waiting for one (another process had it: the machine's share of the step, not the plan's; schedclock.py)
        "measured_cpu_s": [_median_after(r.get("step_cpu_s"), warmup) for r in sorted(ranks, key=lambda r: r["rank"])],
        "measured_runqueue_wait_s": [
            _median_after(r.get("step_runqueue_wait_s"), warmup) for r in sorted(ranks, key=lambda r: r["rank"])
        ],
        # per rank, every step (warm-up included): its wall seconds, its main thread's on a core and waiting for one
        "rank_steps": [
            {
                "rank": r["rank"],
                "step_s": r["step_s"],
                "cpu_s": r.get("step_cpu_s"),
                "runqueue_wait_s": r.get("step_runqueue_wait_s"),
            }
            for r in sorted(ranks, key=lambda r: r["rank"])
        ],
        "predicted_step_s": predicted,
        "step_rel_error": (predicted - measured) / measured if measured > 0 else math.nan,
        "prediction": prediction or {},
        "planner_step_s": spec.predicted_step_s,
        "memory": [
            {
                "rank": r["rank"],
                "stage": r["pp"] + 1,
                "measured_peak_bytes": r["peak_memory_bytes"],
                "predicted_bytes": r["predicted_memory_bytes"],
                "tensors": r.get("tensor_memory", {}),
                "rss_peak_bytes": r.get("rss_peak_bytes"),
            }
            for r in sorted(ranks, key=lambda r: r["rank"])
        ],
        "memory_measure": ranks[0]["memory_measure"],
        # per rank (rank order), the cores it was pinned to (None: not pinned; run/pinning.py)
        "rank_cores": [r.get("cores") for r in sorted(ranks, key=lambda r: r["rank"])],
        "notes": sorted({n for r in ranks for n in r["notes"]}) + waited_note(ranks, warmup, measured),
    }
