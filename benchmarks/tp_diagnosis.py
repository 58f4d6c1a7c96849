"""Tensor parallelism at t = 2: what the analytic price of costmodel/tensor.py says against the layers split as run runs them.

    python benchmarks/tp_diagnosis.py GRAPH [GRAPH ...] [--sizes 1 2 4 8] [--rounds 3] [--repeats 5] [--profile-size 8]

For each imported graph (``milp-partition import torch ... --training --granularity layer``), one launch of 2 CPU ranks
(gloo, each pinned to a core, one torch thread, as ``run`` and the calibration run them) measures, in the same minutes:

* gloo's fits (:func:`milp_partition.run.predict.measure_links`) and ``o_dt``, DTensor's cost per split module, as the
  calibration measures it (the 1 x 1 x 2 empty step with and without :data:`milp_partition.run.empty.TP_PAIRS` column /
  row pairs of 8 x 8 linear modules);
* ``--rounds`` times, alternating: (A) the whole model unsplit on both ranks at once, every pass in step
  (:func:`milp_partition.run.predict.time_layers_in_lockstep`, what the planner reads as ``f_v(b)``, ``g_v(b)`` with 2
  ranks busy) and (B) the same model split over the 2-rank mesh as ``run`` splits it
  (:func:`milp_partition.run.tp_timed.time_split_layers_in_lockstep`), each pass priced by its slowest rank;
* with ``--profile-size``: torch's profiler over 3 passes of the split model and of the unsplit one at that size on
  each rank: the seconds in the collectives (``c10d`` / ``gloo`` / all-reduce events), in aten's operators (self time,
  the collectives excluded) and the rest of the wall time (Python: DTensor's dispatch, redistribution and module
  hooks, autograd's engine).

Per size it prints, for the whole model as one stage (and for its dearest layer), forward plus backward: the analytic
price's terms (``f_v(b)(1 - phi + phi / t)``, the activation all-reduces' bytes, ``o_dt n_v``) and their sum against
(B), the round by round medians, and the 1-minute load average.  Writes nothing under results/ (a diagnosis, quoted in
docs/import.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from milp_partition.costmodel.tensor import collectives_s, split_compute_s  # noqa: E402
from milp_partition.importers.timing import load_profile_spec  # noqa: E402
from milp_partition.io.imported_layers import read_layers  # noqa: E402
from milp_partition.joint.run_split import offered_degrees  # noqa: E402
from milp_partition.run.empty import TP_PAIRS, slowest_rank_layers  # noqa: E402
from milp_partition.run.launch import run_ranks  # noqa: E402

T = 2


def _profiled(timer: Any, passes: int) -> dict[str, float]:
    """Seconds per pass in collectives, in aten's operators (self time) and the rest of the wall time."""
    import time

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(passes):
            timer.plain_pass()
        wall = time.perf_counter() - t0
    coll = aten = 0.0
    for e in prof.key_averages():
        name = e.key.lower()
        if any(w in name for w in ("c10d", "gloo", "allreduce", "all_reduce", "wait_tensor", "_functional_collectives")):
            coll += e.self_cpu_time_total / 1e6
        elif name.startswith("aten::"):
            aten += e.self_cpu_time_total / 1e6
    return {"wall": wall / passes, "collectives": coll / passes, "aten": aten / passes, "rest": (wall - coll - aten) / passes}


def worker(
    rank: int, world: int, store: str, graph: str, sizes: list[int], rounds: int, repeats: int, psize: int, out: str
) -> None:
    from milp_partition.run.engine import apply_tensor_parallel, set_parent_death_signal, tp_roles
    from milp_partition.run.pinning import pin_rank

    set_parent_death_signal()
    pin_rank(rank, world, 1)
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from milp_partition.run.predict import LayerTimer, empty_step, layer_spec, measure_links, time_layers_in_lockstep
    from milp_partition.run.tp_timed import time_split_layers_in_lockstep

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    try:
        data = json.loads(Path(graph).read_text())
        links = measure_links(rank)
        mesh = init_device_mesh("cpu", (1, 1, T), mesh_dim_names=("pp", "dp", "tp"))
        m = 2
        e = empty_step(1, 0, m, torch.device("cpu"), mesh["pp"].get_group(), None, repeats=11)
        paired = empty_step(1, 0, m, torch.device("cpu"), mesh["pp"].get_group(), None, mesh["tp"], TP_PAIRS, repeats=11)
        got: dict[str, Any] = {"links": links.__dict__, "e": e, "paired": paired, "m": m, "rounds": [], "load": []}
        for _ in range(rounds):
            got["load"].append(os.getloadavg()[0])
            a = time_layers_in_lockstep(data, graph, sizes, dist.barrier, 1, repeats).layers
            b = time_split_layers_in_lockstep(data, graph, sizes, T, mesh["tp"], dist.barrier, 1, repeats).layers
            got["rounds"].append({"A": {str(k): v for k, v in a.items()}, "B": {str(k): v for k, v in b.items()}})
        if psize:
            spec = layer_spec(data, graph, [psize])
            roles = tp_roles(spec, spec.node_order, T)
            plain = LayerTimer(spec, 1, 0, samples=psize)
            split = LayerTimer(spec, 1, 0, samples=psize, prepare=lambda mod: apply_tensor_parallel(mod, roles, mesh["tp"], T))
            dist.barrier()
            got["profile_unsplit"] = _profiled(plain, 3)
            dist.barrier()
            got["profile_split"] = _profiled(split, 3)
        Path(out, f"diag{rank}.json").write_text(json.dumps(got))
    finally:
        dist.destroy_process_group()


def analyse(graph: str, ranks: list[dict[str, Any]], sizes: list[int], cpu_profile: str) -> None:
    data = json.loads(Path(graph).read_text())
    model = read_layers(data, graph)
    splits, refused = offered_degrees(model, [T], load_profile_spec(cpu_profile))
    if T not in splits:
        print(f"{graph}: no split at t = {T}: {refused}")
        return
    split = splits[T]
    beta = statistics.fmean(r["links"]["allreduce_beta_s_per_byte"] for r in ranks)
    alpha = statistics.fmean(r["links"]["allreduce_alpha_s"] for r in ranks)
    m = ranks[0]["m"]
    per_pair = max(statistics.fmean(r["paired"] for r in ranks) - statistics.fmean(r["e"] for r in ranks), 0.0) / (TP_PAIRS * m)
    o_dt = per_pair / 2.0
    print(
        f"\n== {Path(graph).stem}: o_dt = {o_dt * 1e6:.1f} us per module (pairs), all-reduce alpha {alpha * 1e6:.1f} us, "
        f"beta {beta * 1e9:.3f} ns/B; load at each round {[round(x, 2) for r in ranks[:1] for x in r['load']]}"
    )
    print(
        "size | F+B unsplit f(b) | analytic: compute, all-reduce bytes, o_dt n, sum | measured split | measured / analytic"
        " | per round measured/analytic | dearest layer: analytic, measured"
    )
    for b in sizes:
        rows = []
        for rnd in range(len(ranks[0]["rounds"])):
            a = slowest_rank_layers([r["rounds"][rnd]["A"][str(b)] for r in ranks])
            s = slowest_rank_layers([r["rounds"][rnd]["B"][str(b)] for r in ranks])
            comp = coll = hooks = meas = 0.0
            worst = ("", 0.0, 0.0)
            for v, (f1, g1) in a.items():
                sp = split[v]
                c = split_compute_s(f1, sp.split_share, T) + split_compute_s(g1, sp.split_share, T)
                x = collectives_s(sp.allreduce_forward_bytes_per_sample, b, T, 0.0, beta)
                x += collectives_s(sp.allreduce_backward_bytes_per_sample, b, T, 0.0, beta)
                h = o_dt * sp.split_modules
                mv = s[v][0] + s[v][1]
                comp, coll, hooks, meas = comp + c, coll + x, hooks + h, meas + mv
                if mv > worst[2]:
                    worst = (v, c + x + h, mv)
            unsplit = sum(f + g for f, g in a.values())
            rows.append((unsplit, comp, coll, hooks, meas, worst))
        med = [statistics.median(r[k] for r in rows) for k in range(5)]
        ana = med[1] + med[2] + med[3]
        ratios = " ".join(f"{r[4] / (r[1] + r[2] + r[3]):.2f}" for r in rows)
        w = rows[len(rows) // 2][5]
        print(
            f"{b:4d} | {med[0] * 1e3:8.3f} ms | {med[1] * 1e3:.3f}, {med[2] * 1e3:.3f}, {med[3] * 1e3:.3f}, {ana * 1e3:.3f} ms"
            f" | {med[4] * 1e3:.3f} ms | {med[4] / ana:.2f} | {ratios} | {w[0]}: {w[1] * 1e3:.3f}, {w[2] * 1e3:.3f} ms"
        )
    b = sizes[-1]
    print(f"per layer at b = {b}, the median over rounds (ms): unsplit f+g | analytic f+g | measured split f, g")
    per = [
        (
            slowest_rank_layers([r["rounds"][k]["A"][str(b)] for r in ranks]),
            slowest_rank_layers([r["rounds"][k]["B"][str(b)] for r in ranks]),
        )
        for k in range(len(ranks[0]["rounds"]))
    ]
    for v in per[0][0]:
        sp = split[v]
        un = statistics.median(a[v][0] + a[v][1] for a, _ in per)
        an = statistics.median(
            split_compute_s(a[v][0] + a[v][1], sp.split_share, T)
            + o_dt * sp.split_modules
            + collectives_s((*sp.allreduce_forward_bytes_per_sample, *sp.allreduce_backward_bytes_per_sample), b, T, 0.0, beta)
            for a, _ in per
        )
        f2, g2 = statistics.median(s[v][0] for _, s in per), statistics.median(s[v][1] for _, s in per)
        print(
            f"  {v:24s} {un * 1e3:8.3f} | {an * 1e3:8.3f} | {f2 * 1e3:8.3f}, {g2 * 1e3:8.3f}  (phi {sp.split_share:.2f}, {sp.split_modules} split modules)"
        )
    for key in ("profile_unsplit", "profile_split"):
        if key in ranks[0]:
            parts = {k: statistics.fmean(r[key][k] for r in ranks) for k in ranks[0][key]}
            print(f"{key} (mean of the ranks, per pass): " + ", ".join(f"{k} {x * 1e3:.3f} ms" for k, x in parts.items()))


def _importable_worker() -> Any:
    """:func:`worker` by a module name the ranks can import (this script runs as ``__main__``)."""
    import importlib

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return importlib.import_module(Path(__file__).stem).worker


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--profile-size", type=int, default=8)
    ap.add_argument("--cpu-profile", default=str(ROOT / "scratch" / "cpu.json"))
    args = ap.parse_args()
    for graph in args.graphs:
        with tempfile.TemporaryDirectory(prefix="tpdiag-") as tmp:
            call = (T, str(Path(tmp) / "store"), str(Path(graph).resolve()), args.sizes, args.rounds, args.repeats,
                    args.profile_size, tmp)  # fmt: skip
            run_ranks(_importable_worker(), T, call, tmp)
            ranks = [json.loads((Path(tmp) / f"diag{r}.json").read_text()) for r in range(T)]
        analyse(graph, ranks, args.sizes, args.cpu_profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
