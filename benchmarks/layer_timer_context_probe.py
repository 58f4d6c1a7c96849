"""The layer timer's sum back to back (as ``--time-layers`` calibrates one rank) against the same timer sampled after a
training step (as ``run`` samples it, before each step), in one process (issue 42; prints one line per clock).

    python benchmarks/layer_timer_context_probe.py GRAPH [--size 4] [--rounds 6] [--clock cpu wall]

``GRAPH``: an import (``milp-partition import torch ... --training --granularity layer``).  Per round: the calibration's
own function (:func:`milp_partition.run.predict.time_layers_by_size`, a new timer, five samples back to back, their
median) and three rounds of a training step of two micro-batches on another copy of the model followed by one sample of
a :class:`milp_partition.run.predict.LayerTimer` (their median); the medians over the rounds, in ms of one micro-batch's
forward + backward.  ``--clock cpu``: the thread's CPU time; ``wall``: ``time.perf_counter``.  Where the two agree in
CPU time and part in wall time, the difference is time spent waiting, not computing.  Nothing is written under
``results/``: docs/import.md quotes its output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def probe(graph: str, b: int, rounds: int) -> dict[str, float]:
    """Median ms of the layers' sum, calibrated back to back and sampled after a step (see the module docstring)."""
    import torch

    from milp_partition.run.model import batch, build_model, loss_fn, optimizer
    from milp_partition.run.predict import LayerTimer, layer_spec, time_layers_by_size

    data = json.loads(Path(graph).read_text())
    spec = dataclasses.replace(layer_spec(data, graph, [b]), microbatches=2, microbatch_size=b)
    timer = LayerTimer(spec, 1, 0, samples=b)
    other = build_model(spec, 0)
    opt = optimizer(spec, other.parameters())
    args, _, target = batch(spec, other, 0, 0)
    torch.set_num_threads(1)
    got: dict[str, list[float]] = {"back to back": [], "after a step": []}
    for _ in range(rounds):
        t = time_layers_by_size(data, graph, [b], 1, 5)
        got["back to back"].append(sum(f + g for f, g in t.times[b].values()))
        after = []
        for _ in range(3):
            for j in range(2):
                loss_fn(other(*[a[j * b : (j + 1) * b] for a in args]), target[j * b : (j + 1) * b]).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            timer.sample()
            after.append(sum(timer.fwd[v][-1] + timer.bwd[v][-1] for v in timer.points if timer.bwd[v]))
        got["after a step"].append(statistics.median(after))
    return {k: 1e3 * statistics.median(v) for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph")
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--clock", nargs="+", choices=("cpu", "wall"), default=["cpu", "wall"])
    args = ap.parse_args()
    wall = time.perf_counter
    for clock in args.clock:
        time.perf_counter = time.thread_time if clock == "cpu" else wall
        ms = probe(args.graph, args.size, args.rounds)
        cells = ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
        print(
            f"{Path(args.graph).stem} b = {args.size} ({clock} clock): {cells}; 1-minute load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
