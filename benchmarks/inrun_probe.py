"""A one-rank plan's passes as the planner prices them against the same passes inside ``run``'s step, in one process
(issue 42, item 1: where the held-back models' t = 1 compute parts from the plan; prints a table).

    python benchmarks/inrun_probe.py GRAPH [GRAPH ...] [--global-batch 8] [--sizes 1 2 4 8] [--rounds 15]

``GRAPH``: an import (``milp-partition import torch ... --training --granularity layer``).  One torch thread, pinned
to one core as ``run`` pins a rank, one gloo rank of its own; per graph and micro-batch size ``b`` (``N = G / b``
micro-batches a step), alternating round by round so that a load that comes and goes moves every way alike:

* ``b2b``: a layer timer sampled three times back to back (as ``time_layers_by_size`` samples it), the third;
* ``cal``: the calibration's layer timer (:class:`milp_partition.run.predict.LayerTimer` as
  :func:`~milp_partition.run.predict.time_layers_by_size` builds it), its nodes summed after ``hooks_removed``:
  ``F + B``, what the planner reads for a one-rank plan; ``plain``: the same timer's pass without hooks;
* ``in-run timer``: ``run``'s own timer, sampled just before each step (as ``engine._train_steps`` does);
* ``step F``, ``step B``, ``step loss``: per micro-batch, the seconds in ``PipelineStage.forward_one_chunk``,
  ``backward_one_chunk`` and the schedule's loss, inside ``Schedule1F1B.step`` on the stage as
  ``engine._mesh_rank`` builds it (the model itself at one stage, the batch sliced and fed as the engine feeds it,
  gradients accumulated over the ``N`` micro-batches and scaled, then the optimizer step and ``zero_grad``);
* ``step``: the whole step as ``run`` times it (barrier to barrier), ``opt``: its optimizer step and ``zero_grad``.

Every figure is the median over ``--rounds`` (after one warm-up round), in ms, on the thread's CPU time and on the
wall clock.  Nothing is written under ``results/``: docs/import.md quotes its output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLUMNS = (
    "b2b F+B",
    "cal F",
    "cal B",
    "cal F+B",
    "plain F",
    "plain B",
    "in-run timer",
    "accum F",
    "accum B",
    "step F",
    "step loss",
    "step B",
    "step F+L+B",
    "opt",
    "step",
    "again F+L+B",
    "again step",
)


class Clocks:
    """Seconds spent in wrapped callables, per name (``time.perf_counter``: the thread's CPU time with ``--clock cpu``);
    :meth:`take` returns and resets them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, obj: Any, attr: str, name: str) -> None:
        fn = getattr(obj, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

        setattr(obj, attr, timed)

    def take(self) -> dict[str, float]:
        got = dict(self.seconds)
        self.seconds.clear()
        return got


def probe(graph: str, G: int, b: int, rounds: int) -> dict[str, float]:
    """Per column the median ms (see the module docstring)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from milp_partition.run.engine import SavedActivations, _stage_module
    from milp_partition.run.model import batch, build_model, loss_fn, optimizer
    from milp_partition.run.predict import LayerTimer, layer_spec
    from milp_partition.run.spec import RunStage

    n = G // b
    data = json.loads(Path(graph).read_text())
    base = layer_spec(data, graph, [b])
    stage_spec = RunStage(nodes=base.node_order, data_parallel=1, tensor_parallel=1)
    spec = dataclasses.replace(base, stages=(stage_spec,), microbatches=n, microbatch_size=b)
    device = torch.device("cpu")
    cal = LayerTimer(dataclasses.replace(base, microbatches=b), 1, 0, samples=b, count_saved=True)
    inrun = LayerTimer(spec, 1, 0, samples=b)
    b2b = LayerTimer(dataclasses.replace(base, microbatches=b), 1, 0, samples=b, count_saved=True)
    mesh = init_device_mesh("cpu", (1, 1, 1), mesh_dim_names=("pp", "dp", "tp"))
    model = build_model(spec, 0)
    batches = [batch(spec, model, k, 0) for k in range(4)]
    args0, kwargs0, _ = batches[0]
    module, params = _stage_module(spec, model, 0, args0, kwargs0, mesh, device, [])
    stage = PipelineStage(module, 0, 1, device, group=mesh["pp"].get_group())
    clocks = Clocks()
    clocks.wrap(stage, "forward_one_chunk", "step F")
    clocks.wrap(stage, "backward_one_chunk", "step B")
    schedule = Schedule1F1B(stage, n, loss_fn=loss_fn, scale_grads=True)
    clocks.wrap(schedule, "_maybe_compute_loss", "step loss")
    opt = optimizer(spec, params)
    saved = SavedActivations(set())
    got: dict[str, list[float]] = {c: [] for c in COLUMNS}

    def timer_sums(timer: LayerTimer) -> tuple[float, float]:
        k = len(timer.passes) - 1
        done = [v for v in timer.points if len(timer.bwd[v]) > k]
        return sum(timer.fwd[v][k] for v in done), sum(timer.bwd[v][k] for v in done)

    for r in range(rounds + 1):
        row: dict[str, float] = {}
        for _ in range(3):  # a timer sampled back to back, as time_layers_by_size samples it: the third sample
            b2b.sample()
        row["b2b F+B"] = sum(timer_sums(b2b))
        cal.sample()  # the calibration's timer
        row["cal F"], row["cal B"] = timer_sums(cal)
        row["cal F+B"] = row["cal F"] + row["cal B"]
        row["plain F"], row["plain B"] = cal.passes[-1][:2]
        args, kwargs, target = batches[r % len(batches)]
        # the engine's module, N micro-batches by hand: forward + loss, backward, gradients accumulated (no schedule)
        xs = [a[: n * b].tensor_split(n) for a in args]
        ts = target[: n * b].tensor_split(n)
        fw = bw = 0.0
        for j in range(n):
            t0 = time.perf_counter()
            loss = loss_fn(module(*[x[j] for x in xs]), ts[j]) / n
            t1 = time.perf_counter()
            loss.backward()
            bw += time.perf_counter() - t1
            fw += t1 - t0
        opt.zero_grad(set_to_none=True)
        row["accum F"], row["accum B"] = fw / n, bw / n
        inrun.sample()  # run's step, as engine._train_steps runs it (its own timer sampled first)
        row["in-run timer"] = sum(timer_sums(inrun))
        for again in ("", "again "):  # the step, then the next one straight after it (no timer between)
            a_args = [a[0 : n * b].to(device) for a in args]
            a_kwargs = {k: v[0 : n * b].to(device) for k, v in kwargs.items()}
            dist.barrier()
            clocks.take()
            t0 = time.perf_counter()
            with saved.during(2):
                schedule.step(*a_args, target=target[0 : n * b].to(device), losses=[], **a_kwargs)
            t1 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            dist.barrier()
            t2 = time.perf_counter()
            inside = clocks.take()
            if not again:
                for c in ("step F", "step B", "step loss"):
                    row[c] = inside.get(c, 0.0) / n
                row["opt"] = t2 - t1
            row[f"{again or 'step '}F+L+B"] = sum(inside.get(c, 0.0) for c in ("step F", "step B", "step loss")) / n
            row[f"{again}step"] = t2 - t0
        if r > 0:
            for c in COLUMNS:
                got[c].append(row[c])
    return {c: 1e3 * statistics.median(x) for c, x in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--no-pin", action="store_true", help="leave the process unpinned (as the solve's own timer runs)")
    args = ap.parse_args()
    if args.clock == "cpu":
        time.perf_counter = time.thread_time  # every clock read, the timers' included
    from milp_partition.run.pinning import pin_rank

    if not args.no_pin:
        pin_rank(0, 1, 1)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="inrun-probe-") as tmp:
        dist.init_process_group("gloo", store=dist.FileStore(os.path.join(tmp, "store"), 1), rank=0, world_size=1)
        try:
            print(f"ms per micro-batch (opt, step: per step), {args.clock} clock; 1-minute load {os.getloadavg()[0]:.1f}")
            print("| model | b | N | " + " | ".join(COLUMNS) + " | step F+L+B / cal F+B |")
            print("|---|---|---|" + "---|" * (len(COLUMNS) + 1))
            for graph in args.graphs:
                for b in args.sizes:
                    ms = probe(graph, args.global_batch, b, args.rounds)
                    cells = " | ".join(f"{ms[c]:.3f}" for c in COLUMNS)
                    ratio = ms["step F+L+B"] / ms["cal F+B"]
                    print(f"| {Path(graph).stem} | {b} | {args.global_batch // b} | {cells} | {ratio:.2f} |", flush=True)
            print(f"1-minute load at the end {os.getloadavg()[0]:.1f}")
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
