"""Where a 2-rank run's compute goes on a CPU: the model's layers timed four ways (issue 42's diagnosis; prints a table).

    python benchmarks/run_compute_probe.py GRAPH [--sizes 4 8] [--repeats 15] [--ranks 2] [--calibration RESULT]

``GRAPH``: an import (``milp-partition import torch ... --training --granularity layer``).  In one group of ``--ranks``
CPU ranks with gloo (launched as ``run`` launches them, one torch thread each), the whole model's forward, backward and optimizer step at each micro-batch size ``b``, timed with the layer timer of
``run`` (:class:`milp_partition.run.predict.LayerTimer`, hooks at every layer):

* ``alone``: each rank in turn while the others wait in a barrier;
* ``lockstep``: a barrier before every pass, so that every rank computes at the same moment, as in a run;
* ``ddp``: ``lockstep`` with the model under ``DistributedDataParallel`` over the ranks (the 1 x d plan's step
  without ``Schedule1F1B``: DDP's hooks and its bucketed all-reduce overlapping the backward);
* ``ddp no_sync``: ``ddp`` inside ``no_sync()`` (DDP's hooks without its all-reduce).

Per way and size: the median over passes of the mean over ranks of the layers' forward + backward sum (what the
planner sums), the median of the slowest rank's, the optimizer step, and the median wall time of a whole pass on the
slowest rank (barrier to barrier).  The ways alternate pass by pass, so that a load that comes and goes on a shared
machine moves them alike.  ``--calibration``: a ``solve --time-layers`` result, whose recorded layer sums (alone, and
with the ranks busy) are printed beside.  Nothing is written under ``results/``: docs/import.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the workers unpickle probe_worker from this module by name

WAYS = ("alone", "lockstep", "ddp", "ddp no_sync")


def probe_worker(rank: int, world: int, store_path: str, graph: str, sizes: list[int], repeats: int, out_dir: str) -> None:
    """One rank: every way at every size, the ways interleaved pass by pass (a load that comes and goes on a shared
    machine then moves every way alike); writes ``probe{rank}.json``."""
    from milp_partition.run.engine import set_parent_death_signal

    set_parent_death_signal()
    import contextlib

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from milp_partition.run.predict import LayerTimer, layer_spec

    torch.set_num_threads(1)
    data = json.loads(Path(graph).read_text())
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    out: dict[str, Any] = {}
    try:
        for b in sizes:
            spec = layer_spec(data, graph, [b])
            timers = {way: LayerTimer(spec, 1, 0, samples=b) for way in WAYS}
            for way in ("ddp", "ddp no_sync"):
                timers[way].model = DistributedDataParallel(timers[way].model)
                timers[way].sample(record=False)
            walls: dict[str, list[float]] = {way: [] for way in WAYS}
            for _ in range(repeats):
                for way in WAYS:
                    timer = timers[way]
                    ctx = timer.model.no_sync() if way == "ddp no_sync" else contextlib.nullcontext()
                    dist.barrier()
                    if way == "alone":  # each rank in turn, the others waiting in a barrier
                        for r in range(world):
                            if r == rank:
                                t0 = time.perf_counter()
                                timer.sample()
                                walls[way].append(time.perf_counter() - t0)
                            dist.barrier()
                        continue
                    t0 = time.perf_counter()
                    with ctx:
                        timer.sample()
                    walls[way].append(time.perf_counter() - t0)
            for way, timer in timers.items():
                sums = [
                    sum(timer.fwd[v][k] + timer.bwd[v][k] for v in timer.points if k < len(timer.bwd[v])) for k in range(repeats)
                ]
                out[f"{way}@{b}"] = {"sum": sums, "opt": timer.opt_times[-repeats:], "wall": walls[way]}
        Path(out_dir, f"probe{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


def launch(graph: str, sizes: list[int], repeats: int, world: int) -> list[dict[str, Any]]:
    from run_compute_probe import probe_worker as fn  # not __main__'s: a worker imports it by its module's name

    from milp_partition.run.launch import run_ranks

    with tempfile.TemporaryDirectory(prefix="milp-probe-") as tmp:
        run_ranks(fn, world, (world, str(Path(tmp) / "store"), graph, sizes, repeats, tmp), tmp)
        return [json.loads(Path(tmp, f"probe{r}.json").read_text()) for r in range(world)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--calibration", help="a solve --time-layers result: its recorded layer sums are printed beside")
    args = ap.parse_args()
    graph = str(Path(args.graph).resolve())
    load = [os.getloadavg()[0]]
    ranks = launch(graph, args.sizes, args.repeats, args.ranks)
    load.append(os.getloadavg()[0])
    print(f"# {Path(graph).name}: {args.repeats} passes per way, 1-minute load {load[0]:.2f} -> {load[1]:.2f}")
    print(
        "| b | way | ranks | layers fwd+bwd, mean of ranks (ms) | slowest rank's (ms) | optimizer (ms) | pass wall, slowest (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    for b in args.sizes:
        for way in WAYS:
            key = f"{way}@{b}"
            n = len(ranks[0][key]["sum"])
            mean = statistics.median(statistics.fmean(r[key]["sum"][k] for r in ranks) for k in range(n))
            worst = statistics.median(max(r[key]["sum"][k] for r in ranks) for k in range(n))
            opt = statistics.median(statistics.fmean(r[key]["opt"][k] for r in ranks) for k in range(n))
            wall = statistics.median(max(r[key]["wall"][k] for r in ranks) for k in range(n))
            print(f"| {b} | {way} | {args.ranks} | {1e3 * mean:.2f} | {1e3 * worst:.2f} | {1e3 * opt:.2f} | {1e3 * wall:.2f} |")
    if args.calibration:
        timed = json.loads(Path(args.calibration).read_text())["cost_model"]["layer_times"]
        for b in args.sizes:
            alone = sum(f + g for f, g in timed["sizes"][str(b)].values())
            busy = timed.get("busy", {}).get(str(args.ranks), {}).get(str(b))
            where = f"calibration {Path(args.calibration).name}"
            print(f"| {b} | {where}: alone | 1 | {1e3 * alone:.2f} | - | - | - |")
            if busy:
                print(
                    f"| {b} | {where}: busy (mean of ranks) | {args.ranks} | {1e3 * sum(f + g for f, g in busy.values()):.2f} | - | - | - |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
