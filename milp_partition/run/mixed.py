"""A plan whose stages have different (data, tensor) degrees, run on its own 1F1B schedule over point-to-point messages.

Such a plan fits no ``(pp, dp, tp)`` device mesh, so ``torch.distributed.pipelining``'s schedules (one rank
per stage per replica) do not take it. Here each stage keeps its own ranks (:class:`~.layout.RankLayout`):
its replicas each run every ``d_q``-th micro-batch (``b`` samples each, the plan's micro-batch size), its tensor-parallel
ranks share a :class:`~torch.distributed.device_mesh.DeviceMesh` of their own for ``parallelize_module``, and
a stage's gradients are all-reduced (summed: every micro-batch's loss is already divided by ``N``) over the
ranks with its tensor-parallel index, in buckets of DDP's size, after the last backward. Between stages,
micro-batch ``j``'s activations go from the first tensor-parallel rank of the replica that made them to every
rank of the replica that takes ``j`` next (``isend``; blocking ``recv``), and their gradients come back the
same way: batch scatter and gather along the micro-batches, whatever the two stages' degrees.

The split itself is ``torch.distributed.pipelining``'s ``pipeline()`` (its stage modules and the graph that
calls them): a stage may read any earlier stage's outputs and the model's own inputs (every rank holds the
batch, so inputs are never sent). The order of passes on each replica is :func:`~.layout.one_f_one_b`'s.

Torch is imported inside the functions.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from milp_partition.run.layout import Place, RankLayout, one_f_one_b

#: DDP's default bucket (``bucket_cap_mb=25``): the gradients are all-reduced in flat buckets of this size.
BUCKET_BYTES = 25 * 2**20

#: Most outputs of one stage (for the message tags).
MAX_OUTPUTS = 64


@dataclass(frozen=True)
class Source:
    """Where one input of a stage module comes from: the model's input ``index`` (``stage`` -1) or output
    ``index`` of an earlier ``stage``."""

    stage: int
    index: int


@dataclass(frozen=True)
class StageIO:
    """One stage module's inputs (in call order) and, per output, whether it is differentiable and who reads it."""

    inputs: tuple[Source, ...]
    outputs_float: tuple[bool, ...]
    output_shapes: tuple[tuple[int, ...], ...]  # of one micro-batch (the size traced: the plan's b samples)
    output_dtypes: tuple[Any, ...]
    consumers: tuple[tuple[int, ...], ...]  # per output: the later stages that read it


def stage_graph(pipe: Any, args1: list[Any], kwargs1: dict[str, Any]) -> tuple[list[StageIO], int]:
    """Each stage's :class:`StageIO` from ``pipeline()``'s ``Pipe`` (its ``split_gm``), and which output of the last
    stage is the model's. ``args1``/``kwargs1``: one micro-batch (the plan's ``b`` samples), run once (no gradients) for the boundary shapes."""
    import torch

    split_gm = pipe.split_gm
    calls = [n for n in split_gm.graph.nodes if n.op == "call_module"]
    stage_of = {n: q for q, n in enumerate(calls)}
    placeholders = [n for n in split_gm.graph.nodes if n.op == "placeholder"]
    position = {n: i for i, n in enumerate(placeholders)}

    def source(arg: Any) -> Source:
        if arg in position:
            return Source(-1, position[arg])
        if arg in stage_of:
            return Source(stage_of[arg], 0)
        if getattr(arg, "op", None) == "call_function" and arg.target is operator.getitem and arg.args[0] in stage_of:
            return Source(stage_of[arg.args[0]], int(arg.args[1]))
        raise RuntimeError(f"a stage reads {arg!r}, neither an input nor an earlier stage's output: not runnable here")

    outs: dict[int, tuple[Any, ...]] = {}
    hooks = [
        getattr(split_gm, str(n.target)).register_forward_hook(
            lambda _m, _i, o, q=q: outs.__setitem__(q, o if isinstance(o, tuple) else (o,))
        )
        for q, n in enumerate(calls)
    ]
    try:
        with torch.no_grad():
            values = [*args1, *kwargs1.values()]
            final = pipe(*values)
    finally:
        for h in hooks:
            h.remove()
    inputs = [tuple(source(a) for a in n.args) for n in calls]
    for q, n in enumerate(calls):
        if n.kwargs:
            raise RuntimeError(f"stage {q + 1} takes keyword arguments from the split: not runnable here")
    readers: dict[tuple[int, int], set[int]] = {}
    for q, srcs in enumerate(inputs):
        for s in srcs:
            if s.stage >= 0:
                readers.setdefault((s.stage, s.index), set()).add(q)
    result = next(n for n in split_gm.graph.nodes if n.op == "output").args[0]
    result = result[0] if isinstance(result, tuple | list) else result
    last = source(result)
    if last.stage != len(calls) - 1:
        raise RuntimeError("the model's output does not come from the last stage: not runnable here")
    del final
    graph = []
    for q in range(len(calls)):
        o = outs[q]
        if len(o) > MAX_OUTPUTS:
            raise RuntimeError(f"stage {q + 1} has {len(o)} outputs; at most {MAX_OUTPUTS} are sent")
        graph.append(
            StageIO(
                inputs[q],
                tuple(bool(t.is_floating_point()) for t in o),
                tuple(tuple(t.shape) for t in o),
                tuple(t.dtype for t in o),
                tuple(tuple(sorted(readers.get((q, k), ()))) for k in range(len(o))),
            )
        )
    return graph, last.index


def _tag(S: int, j: int, src: int, dst: int, index: int, backward: bool) -> int:
    return ((((j * S + src) * S + dst) * MAX_OUTPUTS + index) << 1) | int(backward)


def _local(t: Any) -> Any:
    return t.to_local() if hasattr(t, "to_local") else t


def allreduce_gradients(params: list[Any], group: Any, divide_by: int = 1) -> None:
    """Sum (then divide by ``divide_by``) every parameter's gradient over ``group``, flattened in buckets of
    :data:`BUCKET_BYTES` as DDP does (without its overlap with the backward). A DTensor's local shard is what is
    summed; a parameter without a gradient counts as zeros (every rank of the group calls this alike)."""
    import torch
    import torch.distributed as dist

    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(_local(p.grad))
    bucket: list[Any] = []
    size = 0
    for g in [*grads, None]:
        if g is not None and (not bucket or (size + g.numel() * g.element_size() <= BUCKET_BYTES and g.dtype == bucket[0].dtype)):
            bucket.append(g)
            size += g.numel() * g.element_size()
            continue
        if bucket:
            flat = torch.cat([b.reshape(-1) for b in bucket])
            dist.all_reduce(flat, group=group)
            if divide_by != 1:
                flat /= divide_by
            offset = 0
            for b in bucket:
                b.copy_(flat[offset : offset + b.numel()].view_as(b))
                offset += b.numel()
        bucket, size = ([g], g.numel() * g.element_size()) if g is not None else ([], 0)


class MixedRank:
    """One rank of a mixed plan: its stage module, its schedule, and the messages of one step.

    Parameters
    ----------
    layout, place
        The plan's ranks and this rank's place.
    module
        This rank's stage module, ready (recomputation wrapped, tensor-parallel, on ``device``).
    graph, model_output
        :func:`stage_graph`'s result.
    in_flight
        The planner's micro-batches in flight per stage (``microbatches_in_flight``).
    loss_fn
        ``loss_fn(output, target)``: the mean loss of one micro-batch.
    microbatch_size
        ``b``: samples per micro-batch; micro-batch ``j`` is the batch's samples ``j b .. (j + 1) b - 1``.
    """

    def __init__(
        self,
        layout: RankLayout,
        place: Place,
        module: Any,
        graph: list[StageIO],
        model_output: int,
        in_flight: list[int],
        loss_fn: Any,
        device: Any,
        microbatch_size: int = 1,
    ) -> None:
        self.layout, self.place, self.module, self.graph = layout, place, module, graph
        self.model_output, self.loss_fn, self.device = model_output, loss_fn, device
        self.microbatch_size = microbatch_size
        self.order = one_f_one_b(layout, in_flight)[(place.stage, place.replica)]

    def _recv(self, src_stage: int, index: int, j: int) -> Any:
        import torch
        import torch.distributed as dist

        io = self.graph[src_stage]
        buf = torch.empty(io.output_shapes[index], dtype=io.output_dtypes[index], device=self.device)
        src = self.layout.ranks(src_stage, self.layout.replica_of(src_stage, j))[0]
        dist.recv(buf, src, tag=_tag(self.layout.stages, j, src_stage, self.place.stage, index, False))
        return buf

    def _forward(self, j: int, args: list[Any], target: Any, held: dict[int, Any], sends: list[Any]) -> None:
        import torch.distributed as dist

        q, S = self.place.stage, self.layout.stages
        # received in (stage, output) order, as the senders send: nccl matches messages by their order, not tags
        received: dict[tuple[int, int], Any] = {}
        for p, k in sorted({(s.stage, s.index) for s in self.graph[q].inputs if s.stage >= 0}):
            x = self._recv(p, k, j)
            if self.graph[p].outputs_float[k]:
                x.requires_grad_()
            received[(p, k)] = x
        lo, hi = j * self.microbatch_size, (j + 1) * self.microbatch_size
        inputs = [
            args[s.index][lo:hi].to(self.device) if s.stage < 0 else received[(s.stage, s.index)] for s in self.graph[q].inputs
        ]
        out = self.module(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        if q == S - 1:
            loss = self.loss_fn(outs[self.model_output], target[lo:hi].to(self.device))
            held[j] = (received, (loss,))
            return
        held[j] = (received, outs)
        if self.place.tp_index == 0:
            for k, readers in enumerate(self.graph[q].consumers):
                for c in readers:
                    data = outs[k].detach().contiguous()
                    for dst in self.layout.ranks(c, self.layout.replica_of(c, j)):
                        sends.append((dist.isend(data, dst, tag=_tag(S, j, q, c, k, False)), data))

    def _backward(self, j: int, held: dict[int, Any], sends: list[Any]) -> float:
        import torch
        import torch.distributed as dist

        q, S = self.place.stage, self.layout.stages
        received, outs = held.pop(j)
        loss_value = 0.0
        if q == S - 1:
            scaled = outs[0] / self.layout.microbatches  # the batch's mean: each of the N micro-batches weighs 1/N
            scaled.backward()
            loss_value = float(scaled.detach().to(torch.float64))
        else:
            tensors, grads = [], []
            for k, readers in enumerate(self.graph[q].consumers):
                if not readers or not self.graph[q].outputs_float[k]:
                    continue
                total = None
                for c in readers:
                    buf = torch.empty_like(outs[k], memory_format=torch.contiguous_format)
                    src = self.layout.ranks(c, self.layout.replica_of(c, j))[0]
                    dist.recv(buf, src, tag=_tag(S, j, q, c, k, True))
                    total = buf if total is None else total + buf
                if outs[k].requires_grad:
                    tensors.append(outs[k])
                    grads.append(total)
            if tensors:
                torch.autograd.backward(tensors, grads)
        if self.place.tp_index == 0:
            for (p, k), x in received.items():
                if not self.graph[p].outputs_float[k]:
                    continue
                g = (x.grad if x.grad is not None else torch.zeros_like(x)).contiguous()
                for dst in self.layout.ranks(p, self.layout.replica_of(p, j)):
                    sends.append((dist.isend(g, dst, tag=_tag(S, j, p, q, k, True)), g))
        return loss_value

    def step(self, args: list[Any], target: Any) -> float:
        """The passes of one batch (``args``, ``target``: all ``N b`` samples); the sum of this rank's micro-batch
        losses over ``N`` (on the last stage; 0 elsewhere). Gradients accumulate in the module's parameters."""
        held: dict[int, Any] = {}
        sends: list[Any] = []
        loss = 0.0
        for kind, j in self.order:
            if kind == "F":
                self._forward(j, args, target, held, sends)
            else:
                loss += self._backward(j, held, sends)
        for work, _ in sends:
            work.wait()
        return loss
