"""The passes the planner prices against the passes a run executes, in one process (issue 42's diagnosis; prints a table).

    python benchmarks/run_pass_probe.py GRAPH [GRAPH ...] [--sizes 1 4] [--microbatches 8 2] [--repeats 15] [--clock cpu]

``GRAPH``: an import (``milp-partition import torch ... --training --granularity layer``).  One torch thread, one
gloo rank of its own; per graph and micro-batch size ``b`` (with ``N`` micro-batches a step, ``--microbatches``, paired
with ``--sizes``), the model's forward (with the loss) and backward of one micro-batch, in ms, six ways, alternating
pass by pass so that a load that comes and goes moves them alike (the medians of ``--repeats``):

* ``timer``: the layer timer the planner reads (:class:`milp_partition.run.predict.LayerTimer`), its nodes summed;
* ``timer hooked``: the same timer's hooked pass as timed (before its hooks' share comes off);
* ``full hooks``: the layer timer before issue 42's fix (a forward pre-hook and a full backward pre-hook per node);
* ``plain``: the whole model's pass without hooks;
* ``run``: the model as ``run`` executes a one-stage plan (``PipelineStage`` and ``Schedule1F1B`` over ``N``
  micro-batches, ``engine.ChunkClock``'s seconds in the passes, per micro-batch);
* ``run, counting``: the same with ``engine.SavedActivations``' hooks on (as every step of a run had them before
  the fix; a run now counts on its warm-up step only).

``--clock cpu`` (default) reads the thread's CPU time (``time.thread_time``): on a shared machine a wall clock counts
the time the process waits for a core, and the six ways differ by less than the waits; ``--clock wall`` reads
``time.perf_counter``.  Nothing is written under ``results/``: docs/import.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WAYS = ("timer", "timer hooked", "full hooks", "plain", "run", "run, counting")


def _full_hooks(model: Any, points: list[str], stamps: dict[str, float]) -> None:
    """The layer timer's hooks before the fix: a forward pre-hook and a full backward pre-hook per node."""
    import warnings

    warnings.filterwarnings("ignore", message="Full backward hook")
    named = dict(model.named_modules())
    for v in points:
        named[v].register_forward_pre_hook(lambda m, a, v=v: stamps.__setitem__(v, time.perf_counter()))
        named[v].register_full_backward_pre_hook(lambda m, g, v=v: stamps.__setitem__(v + ":b", time.perf_counter()))


def probe(graph: str, b: int, n: int, repeats: int) -> dict[str, float]:
    """Per way the median forward + backward ms of one micro-batch of ``b`` samples (``run``: ``n`` micro-batches a step)."""
    import dataclasses

    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from milp_partition.run.engine import ChunkClock, SavedActivations
    from milp_partition.run.model import batch, build_model, loss_fn
    from milp_partition.run.predict import LayerTimer, layer_spec

    data = json.loads(Path(graph).read_text())
    spec = dataclasses.replace(layer_spec(data, graph, [b]), microbatches=n, microbatch_size=b)
    timer = LayerTimer(spec, 1, 0, samples=b)

    def plain_of(model: Any) -> Callable[[], float]:
        args, kwargs, target = batch(spec, model, 0, 0)
        x, kw, tg = [a[:b].clone() for a in args], {k: v[:b].clone() for k, v in kwargs.items()}, target[:b]

        def one() -> float:
            t0 = time.perf_counter()
            loss_fn(model(*x, **kw), tg).backward()
            t1 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            return t1 - t0

        return one

    plain = plain_of(build_model(spec, 0))
    hooked_model = build_model(spec, 0)
    _full_hooks(hooked_model, timer.points, {})
    full = plain_of(hooked_model)
    run_model = build_model(spec, 0)
    stage = PipelineStage(run_model, 0, 1, torch.device("cpu"))
    clock = ChunkClock(stage)
    schedule = Schedule1F1B(stage, n, loss_fn=loss_fn, scale_grads=True)
    args, kwargs, target = batch(spec, run_model, 0, 0)
    counter = SavedActivations({p.untyped_storage().data_ptr() for p in run_model.parameters()})

    def run(counting: bool) -> float:
        clock.take()
        with counter.during(0 if counting else 1):
            schedule.step(*args, target=target, losses=[], **kwargs)
        run_model.zero_grad(set_to_none=True)
        return clock.take() / n

    def timed() -> tuple[float, float]:
        timer.sample()
        k = len(timer.passes) - 1
        total = sum(timer.fwd[v][k] + timer.bwd[v][k] for v in timer.points if len(timer.bwd[v]) > k)
        return total, timer.passes[k][2] + timer.passes[k][3]

    got: dict[str, list[float]] = {w: [] for w in WAYS}
    for k in range(repeats + 1):
        t, h = timed()
        one = {"timer": t, "timer hooked": h, "full hooks": full(), "plain": plain(), "run": run(False)}
        one["run, counting"] = run(True)
        if k > 0:  # the first round warms up
            for w, x in one.items():
                got[w].append(x)
    return {w: 1e3 * statistics.median(x) for w, x in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--microbatches", type=int, nargs="+", default=[8, 2])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args()
    if len(args.sizes) != len(args.microbatches):
        ap.error("--sizes and --microbatches pair up: give as many of each")
    if args.clock == "cpu":
        time.perf_counter = time.thread_time  # every clock read below, the timer's and ChunkClock's included
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        print(f"ms of one micro-batch's forward + backward ({args.clock} clock), 1-minute load {os.getloadavg()[0]:.1f}")
        print("| model | b | N | " + " | ".join(WAYS) + " | run / timer |")
        print("|---|---|---|" + "---|" * (len(WAYS) + 1))
        for graph in args.graphs:
            for b, n in zip(args.sizes, args.microbatches):
                ms = probe(graph, b, n, args.repeats)
                cells = " | ".join(f"{ms[w]:.3f}" for w in WAYS)
                print(f"| {Path(graph).stem} | {b} | {n} | {cells} | {ms['run'] / ms['timer']:.2f} |", flush=True)
        print(f"1-minute load at the end {os.getloadavg()[0]:.1f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
