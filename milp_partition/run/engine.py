"""The torch side of ``milp-partition run``: one worker per device, and the single-process reference.

Everything distributed is torch's own: the process group (gloo on CPU, nccl with CUDA) over a
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

import math
import os
import signal
import statistics
import threading
import time
from dataclasses import replace
from typing import Any

from milp_partition.importers.torch_import import build_module, make_inputs, parse_input_shape
from milp_partition.io.imported_layers import read_layers
from milp_partition.joint.megatron import split_layer
from milp_partition.run.spec import RunSpec


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


def build_model(spec: RunSpec, seed: int) -> Any:
    """The model from its import reference, initialised from ``seed``, in the import's dtype."""
    import torch

    torch.manual_seed(seed)
    model = build_module(spec.model)
    dtype = getattr(torch, spec.dtype, torch.float32)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        model = model.to(dtype)
    return model.train()


def batch(spec: RunSpec, model: Any, step: int, seed: int) -> tuple[list[Any], dict[str, Any], Any]:
    """Step ``step``'s synthetic batch of ``N`` samples: inputs (from the import's specs) and class targets."""
    import torch

    specs = [parse_input_shape(s) for s in spec.inputs]
    specs = [replace(s, shape=(spec.microbatches, *s.shape[1:])) for s in specs]
    args, kwargs = make_inputs(specs, spec.dtype, seed=seed * 100_003 + step, model=model)
    with torch.no_grad():  # the output's shape per sample, from the first sample
        out = model(*[a[:1] for a in args], **{k: v[:1] for k, v in kwargs.items()})
    gen = torch.Generator().manual_seed(seed * 100_003 + step + 7)
    target = torch.randint(0, out.shape[-1], (spec.microbatches, *out.shape[1:-1]), generator=gen)
    return args, kwargs, target


def loss_fn(out: Any, target: Any) -> Any:
    """Mean cross-entropy over every position (the last dimension holds the classes or the vocabulary)."""
    from torch.nn import functional as F

    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def optimizer(spec: RunSpec, params: Any) -> Any:
    """Adam when the import counted two moments of optimizer state (factor >= 3: gradients + 2), else SGD."""
    import torch

    params = list(params)
    if spec.optimizer_state_factor >= 3:
        return torch.optim.Adam(params, lr=1e-3, foreach=False)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9 if spec.optimizer_state_factor >= 2 else 0.0, foreach=False)


def reference(spec: RunSpec, steps: int, seed: int) -> dict[str, Any]:
    """The same steps in one process on the whole batch: per-step losses and times."""
    import torch

    model = build_model(spec, seed)
    opt = optimizer(spec, model.parameters())
    losses: list[float] = []
    times: list[float] = []
    for k in range(steps):
        args, kwargs, target = batch(spec, model, k, seed)
        t0 = time.perf_counter()
        loss = loss_fn(model(*args, **kwargs), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
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


def worker(rank: int, world: int, store_path: str, spec: RunSpec, steps: int, seed: int, threads: int, out_dir: str) -> None:
    """One rank: build the model, split, parallelise, run ``steps`` steps, write ``rank{rank}.json`` to ``out_dir``."""
    set_parent_death_signal()
    import json

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, pipeline

    torch.set_num_threads(threads)
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    device = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    try:
        S, D, T = spec.shape
        mesh = init_device_mesh(device.type, (S, D, T), mesh_dim_names=("pp", "dp", "tp"))
        pp, dp = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
        notes: list[str] = []
        base_rss = _rss_bytes()
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        model = build_model(spec, seed)
        batches = [batch(spec, model, k, seed) for k in range(steps)]  # every step's data, before the split
        args0, kwargs0, _ = batches[0]
        stage_spec = spec.stages[pp]
        if S > 1:
            points, cut_notes = _split_points(spec)
            notes += cut_notes
            pipe = pipeline(model, tuple(a[:1] for a in args0), {k: v[:1] for k, v in kwargs0.items()} or None, split_spec=points)
            module = pipe.get_stage_module(pp)
            del pipe, model  # only this stage's module stays
        else:
            module = model
        if stage_spec.recomputed:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

            wanted = {id(m) for p, m in module.named_modules() if p in set(stage_spec.recomputed)}
            apply_activation_checkpointing(module, check_fn=lambda m: id(m) in wanted)
        if T > 1:
            notes += apply_tensor_parallel(module, tp_roles(spec, stage_spec.nodes, T), mesh["tp"], T)
        module = module.to(device)
        params = list(module.parameters())
        if D > 1:
            if T > 1:
                raise RuntimeError("data and tensor parallelism together need FSDP2 over DTensor: not in this version")
            from torch.nn.parallel import DistributedDataParallel

            module = DistributedDataParallel(module, process_group=mesh["dp"].get_group())
        n_micro = spec.microbatches // D
        stage = PipelineStage(module, pp, S, device, group=mesh["pp"].get_group())
        schedule = Schedule1F1B(stage, n_micro, loss_fn=loss_fn, scale_grads=True)
        opt = optimizer(spec, params)
        losses: list[float] = []
        times: list[float] = []
        with PeakRss() as rss:
            for k in range(steps):
                args, kwargs, target = batches[k]
                lo, hi = dp * n_micro, (dp + 1) * n_micro
                args = [a[lo:hi].to(device) for a in args]
                kwargs = {n: v[lo:hi].to(device) for n, v in kwargs.items()}
                mb_losses: list[Any] = []
                dist.barrier()
                t0 = time.perf_counter()
                if S == 1:
                    schedule.step(*args, target=target[lo:hi].to(device), losses=mb_losses, **kwargs)
                elif pp == 0:
                    schedule.step(*args, **kwargs)
                elif pp == S - 1:
                    schedule.step(target=target[lo:hi].to(device), losses=mb_losses)
                else:
                    schedule.step()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if cuda:
                    torch.cuda.synchronize(device)
                dist.barrier()
                times.append(time.perf_counter() - t0)
                if mb_losses:
                    mean = torch.stack([x.detach().to(torch.float64) for x in mb_losses]).mean()
                    if D > 1:
                        dist.all_reduce(mean, group=mesh["dp"].get_group())
                        mean /= D
                    losses.append(float(mean))
        peak = torch.cuda.max_memory_allocated(device) if cuda else rss.peak - base_rss
        result = {
            "rank": rank,
            "pp": pp,
            "dp": dp,
            "tp": mesh["tp"].get_local_rank(),
            "losses": losses,
            "step_s": times,
            "peak_memory_bytes": int(peak),
            "memory_measure": "torch.cuda.max_memory_allocated"
            if cuda
            else "peak RSS during the steps minus RSS before the model",
            "predicted_memory_bytes": stage_spec.predicted_memory_bytes,
            "backend": backend,
            "notes": notes,
        }
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump(result, fh)
    finally:
        dist.destroy_process_group()


def summarise(spec: RunSpec, ranks: list[dict[str, Any]], ref: dict[str, Any], warmup: int) -> dict[str, Any]:
    """run.json's figures from the ranks' results and the single-process reference."""
    last = [r for r in ranks if r["losses"]]
    losses = last[0]["losses"] if last else []
    ref_losses = ref["losses"]
    diffs = [abs(a - b) / abs(b) if b else abs(a - b) for a, b in zip(losses, ref_losses)]
    per_step = [max(r["step_s"][k] for r in ranks) for k in range(len(ranks[0]["step_s"]))]
    measured = statistics.median(per_step[warmup:] or per_step)
    s, d, t = spec.shape
    return {
        "plan": spec.plan_path,
        "graph": spec.graph_path,
        "model": spec.model,
        "shape": {"stages": s, "data_parallel": d, "tensor_parallel": t},
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
        "predicted_step_s": spec.predicted_step_s,
        "step_rel_error": (spec.predicted_step_s - measured) / measured if measured > 0 else math.nan,
        "memory": [
            {
                "rank": r["rank"],
                "stage": r["pp"] + 1,
                "measured_peak_bytes": r["peak_memory_bytes"],
                "predicted_bytes": r["predicted_memory_bytes"],
            }
            for r in sorted(ranks, key=lambda r: r["rank"])
        ],
        "memory_measure": ranks[0]["memory_measure"],
        "notes": sorted({n for r in ranks for n in r["notes"]}),
    }
