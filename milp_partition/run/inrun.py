"""A one-rank plan's layer times as ``run`` executes them: the layer timer scaled to the passes inside the run's step.

The layer timer (:class:`milp_partition.run.predict.LayerTimer`) times each node of the whole model on one
micro-batch, and its nodes sum to the model's pass without hooks.  A one-rank plan runs that pass inside
``Schedule1F1B.step`` on a :class:`~torch.distributed.pipelining.PipelineStage` (``engine._mesh_rank``): the batch cut
into ``N`` micro-batches, the loss computed by the schedule, gradients accumulated over the micro-batches and scaled,
the optimizer step and ``zero_grad`` after, the layer timer sampled before each step, the rank pinned to a core of its
own.  Those passes are what the plan's step spends (issue 42: the held-back MLP-GELU's one-rank steps ran 1.6-1.9x the
planned ``m (F + B)`` in their passes, results/plan_fidelity.md; docs/import.md, the third diagnosis), and their
excess over the timer cannot be attributed to one layer.  So :func:`time_layers_in_step`, run on one rank launched as
``run`` launches it, alternates round by round at each micro-batch size ``b``: a sample of the layer timer, then
``run``'s step of the model over ``N = G / b`` micro-batches (``engine``'s own stage, schedule and optimizer), then the
empty step's tiny module through the same schedule code; per round, in the thread's CPU time::

    kappa_F(b) = (fwd chunks + loss of the model - those of the tiny module) / N   /   the plain pass's forward
    kappa_B(b) = (bwd chunks of the model - those of the tiny module) / N          /   the plain pass's backward

(the tiny module's chunks are the schedule's per-micro-batch cost, which the empty step ``E`` already holds; the plain
pass is the model's pass without hooks as the timer runs it, to which its nodes sum), the median over the rounds;
each node's one-rank time at ``b`` is then ``kappa_F(b) f_v(b)``, ``kappa_B(b) g_v(b)`` (the timer's medians, wall
clock).  The ratio is taken in CPU time: on a machine whose other work takes the core now and then, a wall clock counts
those waits in whichever of the three they fell (``kappa`` on wall clocks at 1-minute load 8 ranged 0.07-4.9 over the
sizes of one model); CPU time counts what the passes execute, and the timer's wall clock gives the level, as for every
other timed layer.  These are the one cost model's ``f_v(b)``, ``g_v(b)`` of a plan on one rank
(:attr:`milp_partition.costmodel.plan.RunLayer.busy_forward_s` at one rank), read alike by the planner's DP, the
verifier and ``run``'s prediction (:func:`milp_partition.run.predict.planned_in_step_factors`).

Torch is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from milp_partition.run.engine import _stage_module
from milp_partition.run.interleave import interleaved_rounds, model_bytes, size_groups
from milp_partition.run.model import batch, build_model, loss_fn, optimizer
from milp_partition.run.predict import LayerTimer, layer_spec
from milp_partition.run.spec import RunStage


@dataclass(frozen=True)
class InStepTimings:
    """What :func:`time_layers_in_step` measured on one rank.

    Attributes
    ----------
    layers
        Size ``b`` -> node -> (forward, backward) seconds of one micro-batch: the timer's medians times ``kappa``.
    factors
        Size ``b`` -> (``kappa_F``, ``kappa_B``): the passes inside ``run``'s step over the layer timer's (medians over
        the rounds of each round's ratio).
    passes_s
        Size ``b`` -> (the model's pass without hooks as the timer runs it, the step's passes per micro-batch, the tiny
        module's passes per micro-batch through the same schedule code), the thread's CPU seconds, medians over the
        rounds (for the report).
    optimizer_s
        The optimizer's step and ``zero_grad`` of the whole model as ``run``'s step runs them, right after its
        schedule's passes (wall clock, the median over every round of every size; the step does not depend on the
        size): the one cost model's optimizer price for the model's imports (``solve --time-layers``).  0 when no round was recorded.
    param_tensors
        The model's parameter tensors (what :attr:`optimizer_s` steps over).
    """

    layers: dict[int, dict[str, tuple[float, float]]]
    factors: dict[int, tuple[float, float]] = field(default_factory=dict)
    passes_s: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    optimizer_s: float = 0.0
    param_tensors: int = 0


class _Chunks:
    """The thread's CPU seconds in a stage's forward chunks plus the schedule's loss, and in its backward chunks."""

    def __init__(self, stage: Any, schedule: Any) -> None:
        self.forward_s = 0.0
        self.backward_s = 0.0
        self._wrap(stage, "forward_one_chunk", True)
        self._wrap(stage, "backward_one_chunk", False)
        self._wrap(schedule, "_maybe_compute_loss", True)

    def _wrap(self, obj: Any, name: str, forward: bool) -> None:
        fn = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if forward:
                    self.forward_s += time.thread_time() - t0
                else:
                    self.backward_s += time.thread_time() - t0

        setattr(obj, name, timed)

    def take(self) -> tuple[float, float]:
        got = (self.forward_s, self.backward_s)
        self.forward_s = self.backward_s = 0.0
        return got


def _tiny_schedule(n_micro: int, device: Any, group: Any) -> tuple[Callable[[], None], _Chunks]:
    """The empty step's module (:func:`milp_partition.run.predict.empty_step`: a small linear module, cross-entropy) through
    ``Schedule1F1B`` on one stage: one step's callable and its chunk clock."""
    import torch
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    torch.manual_seed(0)
    module = nn.Linear(8, 8).to(device)

    def ce(out: Any, tgt: Any) -> Any:
        return nn.functional.cross_entropy(out.reshape(-1, 8), tgt.reshape(-1))

    schedule = Schedule1F1B(PipelineStage(module, 0, 1, device, group=group), n_micro, loss_fn=ce, scale_grads=True)
    chunks = _Chunks(schedule._stage, schedule)
    xs = torch.randn(n_micro, 4, 8, device=device)
    target = torch.randint(0, 8, (n_micro, 4), device=device)

    def step() -> None:
        schedule.step(xs, target=target, losses=[])
        module.zero_grad(set_to_none=True)

    return step, chunks


def in_step_factor(step_s: float, tiny_s: float, timer_s: float) -> float:
    """``kappa``: the step's passes of one micro-batch less the tiny module's (the schedule's own cost, in ``E``) over the
    timer's sum; 1 where the timer measured nothing, never below 0."""
    if timer_s <= 0:
        return 1.0
    return max(step_s - tiny_s, 0.0) / timer_s


def scaled_layers(fwd: dict[str, float], bwd: dict[str, float], factors: tuple[float, float]) -> dict[str, tuple[float, float]]:
    """Each node's (forward, backward) times ``(kappa_F, kappa_B)``."""
    return {v: (factors[0] * fwd[v], factors[1] * bwd.get(v, 0.0)) for v in fwd}


class _SizeRounds:
    """One micro-batch size's timer, ``run``'s stage, schedule and optimizer for :func:`time_layers_in_step`, and its
    rounds' figures (:meth:`one_round`)."""

    def __init__(self, base: Any, b: int, global_batch: int, threads: int, seed: int, mesh: Any, device: Any) -> None:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        self.b, self.n = b, max(global_batch // b, 1)
        spec = dataclasses.replace(
            base,
            stages=(RunStage(nodes=base.node_order, data_parallel=1, tensor_parallel=1),),
            microbatches=self.n,
            microbatch_size=b,
        )
        self.device = device
        self.timer = LayerTimer(spec, threads, seed, samples=b)
        model = build_model(spec, seed)
        self.batches = [batch(spec, model, k, seed) for k in range(2)]
        module, params = _stage_module(spec, model, 0, self.batches[0][0], self.batches[0][1], mesh, device, [])
        self.schedule = Schedule1F1B(
            PipelineStage(module, 0, 1, device, group=mesh["pp"].get_group()), self.n, loss_fn=loss_fn, scale_grads=True
        )
        self.chunks = _Chunks(self.schedule._stage, self.schedule)
        self.opt = optimizer(spec, params)
        self.param_tensors = len(params)
        self.optimizer_s: list[float] = []
        self.tiny, self.tiny_chunks = _tiny_schedule(self.n, device, mesh["pp"].get_group())
        self.ratios: list[tuple[float, float]] = []
        self.sums: list[tuple[float, float, float]] = []
        self.taken = 0

    def one_round(self, record: bool) -> None:
        """A sample of the layer timer, ``run``'s step over ``n`` micro-batches, the tiny module's step; their ratio."""
        import torch.distributed as dist

        n, b = self.n, self.b
        self.timer.sample(record=record)
        plain_f, plain_b = self.timer.plain_pass(time.thread_time)
        args, kwargs, target = self.batches[self.taken % len(self.batches)]
        self.taken += 1
        args = [a[: n * b].to(self.device) for a in args]  # as engine._train_steps feeds its one replica
        kwargs = {k: v[: n * b].to(self.device) for k, v in kwargs.items()}
        dist.barrier()
        self.chunks.take()
        self.schedule.step(*args, target=target[: n * b].to(self.device), losses=[], **kwargs)
        t0 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        opt_s = time.perf_counter() - t0
        dist.barrier()
        step_f, step_b = self.chunks.take()
        self.tiny_chunks.take()
        self.tiny()
        tiny_f, tiny_b = self.tiny_chunks.take()
        if not record:
            return
        self.optimizer_s.append(opt_s)
        self.ratios.append((in_step_factor(step_f / n, tiny_f / n, plain_f), in_step_factor(step_b / n, tiny_b / n, plain_b)))
        self.sums.append((plain_f + plain_b, (step_f + step_b) / n, (tiny_f + tiny_b) / n))

    def factors(self) -> tuple[float, float]:
        return statistics.median(x for x, _ in self.ratios), statistics.median(y for _, y in self.ratios)

    def passes(self) -> tuple[float, float, float]:
        return (
            statistics.median(x for x, _, _ in self.sums),
            statistics.median(y for _, y, _ in self.sums),
            statistics.median(z for _, _, z in self.sums),
        )


def time_layers_in_step(
    data: dict[str, Any],
    graph_path: str,
    sizes: Sequence[int],
    global_batch: int,
    threads: int = 1,
    rounds: int = 7,
    seed: int = 0,
    min_seconds: float = 0.0,
) -> InStepTimings:
    """The imported model's one-rank layer times at each micro-batch size ``b`` of ``sizes`` (``N = global_batch // b``
    micro-batches a step), scaled to the passes inside ``run``'s step (see the module docstring).

    ``rounds`` rounds at least (after one of warm-up), every size in turn in each round, for at least ``min_seconds``
    (:func:`milp_partition.run.interleave.interleaved_rounds`; sizes whose models together would hold more than
    :data:`milp_partition.run.interleave.INTERLEAVED_BYTES` are timed one after another instead, each for its share
    of ``min_seconds``: :func:`milp_partition.run.interleave.size_groups`).
    Needs a one-rank default process group (the calibration's worker of one rank, launched and pinned as ``run``
    launches its ranks).
    """
    import torch
    from torch.distributed.device_mesh import init_device_mesh

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    device = torch.device("cpu")
    mesh = init_device_mesh("cpu", (1, 1, 1), mesh_dim_names=("pp", "dp", "tp"))
    base = layer_spec(data, graph_path, sizes)
    layers: dict[int, dict[str, tuple[float, float]]] = {}
    factors: dict[int, tuple[float, float]] = {}
    passes: dict[int, tuple[float, float, float]] = {}
    optimizer_s: list[float] = []
    tensors = 0
    try:
        for group in size_groups(sizes, 2 * model_bytes(data), min_seconds):  # the timer's model and the stage's
            states = [_SizeRounds(base, b, global_batch, threads, seed, mesh, device) for b in group.sizes]
            interleaved_rounds(states, _SizeRounds.one_round, rounds, group.seconds)
            for state in states:
                prof = state.timer.profile()
                factors[state.b] = state.factors()
                passes[state.b] = state.passes()
                layers[state.b] = scaled_layers(dict(prof.forward_s), dict(prof.backward_s), factors[state.b])
                optimizer_s += state.optimizer_s
                tensors = state.param_tensors
            del states  # this group's models go before the next group's are built
    finally:
        torch.set_num_threads(previous)
    return InStepTimings(layers, factors, passes, statistics.median(optimizer_s) if optimizer_s else 0.0, tensors)
