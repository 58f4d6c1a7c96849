"""How fast the same work runs on this CPU from one second to the next and from one process to the next: the floor
under plan fidelity on CPU ranks (issue 42; writes results/cpu_regimes.{md,csv}).

    python benchmarks/cpu_regimes.py [--seconds 60] [--window-s 0.5] [--processes 12] [--core 0]

``results/plan_fidelity.md`` measures each plan in three separate launches, and on a quiet machine the launches of one
plan disagree by over 25% on about half of the held-back plans (MLP-GELU 1x1x1 N = 8: 0.0148, 0.0132 and 0.0077 s)
while the steps inside one launch agree within a few per cent.  This script isolates the machine's part.  The work is
a held-back model's one-rank training step (its own layers, ``N`` micro-batches of ``b`` samples, forward, backward,
Adam; one torch thread, pinned to one core as ``run`` pins a rank; no ``run``, no gloo, no pipeline), timed on the
thread's CPU time (what the process executes: waits for a core another process held are not counted).

* **one process, over time**: the step repeated for ``--seconds``; the median step of each ``--window-s`` window.
  A machine whose speed does not change gives windows within a few per cent of each other.
* **fresh processes**: ``--processes`` new Python processes, each timing ``--steps`` steps after three warm-up steps
  (what one launch of ``run`` times), with address-space layout randomisation on (as ``run`` starts its ranks) and,
  where the system has ``setarch``, off (every process with one layout): if the spread were the processes' memory
  layout it would vanish with one layout.

Per model: the least, median and largest step (ms), largest / least, and the share of pairs (windows, or processes)
over 25% apart; for the windows also the median length (s) of a run of consecutive windows on one side of the median,
how long the machine stays in one speed.  Nothing here is the planner's: it measures the machine.  Run it on idle cores
(the load is recorded).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The held-back models of results/plan_fidelity.md (their builders in milp_partition.importers.models), each with
#: the input a sample has (features, or sequence x features), its classes, and the micro-batch count and size a step.
MODELS: dict[str, dict[str, Any]] = {
    "MLP-GELU": {"builder": "mlp_heldout_test", "sample": [48], "classes": 10, "microbatches": 8, "size": 1},
    "Encoder": {"builder": "encoder_heldout_test", "sample": [16, 64], "classes": 64, "microbatches": 8, "size": 1},
}

#: The child's program: ``python -c CHILD MODEL_JSON STEPS SECONDS WINDOW_S CORE``; prints one JSON line: the step's
#: CPU seconds, one per step (``STEPS > 0``: that many after three warm-up steps), or one median per window (``SECONDS``).
CHILD = r"""
import json, os, statistics, sys, time
cfg = json.loads(sys.argv[1]); steps = int(sys.argv[2]); seconds = float(sys.argv[3]); window = float(sys.argv[4])
try:
    os.sched_setaffinity(0, {int(sys.argv[5])})
except (AttributeError, OSError):
    pass
import torch
from milp_partition.importers import models
torch.set_num_threads(1)
torch.manual_seed(0)
model = getattr(models, cfg["builder"])()
opt = torch.optim.Adam(model.parameters())
n, b = cfg["microbatches"], cfg["size"]
x = torch.randn(n * b, *cfg["sample"])
y = torch.randint(0, cfg["classes"], (n * b, *cfg["sample"][:-1]))
loss_fn = torch.nn.CrossEntropyLoss()
def step():
    c0 = time.thread_time()
    opt.zero_grad()
    for i in range(n):
        o = model(x[i * b:(i + 1) * b])
        loss_fn(o.reshape(-1, o.shape[-1]), y[i * b:(i + 1) * b].reshape(-1)).backward()
    opt.step()
    return time.thread_time() - c0
for _ in range(3):
    step()
if steps > 0:
    print(json.dumps([step() for _ in range(steps)]))
else:
    t0 = time.perf_counter(); windows = {}
    while time.perf_counter() - t0 < seconds:
        s = step()
        windows.setdefault(int((time.perf_counter() - t0) / window), []).append(s)
    print(json.dumps([statistics.median(v) for _, v in sorted(windows.items())]))
"""


def child(
    cfg: dict[str, Any], core: int, steps: int = 0, seconds: float = 0.0, window_s: float = 0.5, no_aslr: bool = False
) -> list[float]:
    """One fresh process's step times (``steps``) or window medians (``seconds``), CPU seconds."""
    cmd = [sys.executable, "-c", CHILD, json.dumps(cfg), str(steps), str(seconds), str(window_s), str(core)]
    if no_aslr:
        cmd = ["setarch", platform.machine(), "-R", *cmd]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    got = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return [float(v) for v in json.loads(got.stdout.strip().splitlines()[-1])]


def apart_share(values: list[float], bar: float = 0.25) -> float:
    """The share of pairs of ``values`` that differ by more than ``bar`` of the smaller one."""
    pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
    return sum(1 for a, b in pairs if abs(a - b) > bar * min(a, b)) / len(pairs) if pairs else float("nan")


def run_length_s(values: list[float], window_s: float) -> float:
    """The median length (s) of a run of consecutive windows on one side of the windows' median."""
    med = statistics.median(values)
    runs, current, side = [], 0, None
    for v in values:
        s = v > med
        if s == side:
            current += 1
        else:
            if current:
                runs.append(current)
            current, side = 1, s
    runs.append(current)
    return statistics.median(runs) * window_s


def row(model: str, what: str, values: list[float], **extra: Any) -> dict[str, Any]:
    """One table row over ``values`` (seconds)."""
    return {
        "model": model,
        "what": what,
        "samples": len(values),
        "least_ms": min(values) * 1e3,
        "median_ms": statistics.median(values) * 1e3,
        "largest_ms": max(values) * 1e3,
        "largest_over_least": max(values) / min(values),
        "pairs_over_25pct_apart": apart_share(values),
        **extra,
        "each_ms": " ".join(f"{v * 1e3:.2f}" for v in values),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="one process's time over windows (default 60)")
    ap.add_argument("--window-s", type=float, default=0.5, help="a window's seconds (default 0.5)")
    ap.add_argument("--processes", type=int, default=12, help="fresh processes per model and layout (default 12)")
    ap.add_argument("--steps", type=int, default=11, help="timed steps per fresh process, as run times (default 11)")
    ap.add_argument("--core", type=int, default=0, help="the core every process is pinned to (default 0)")
    ap.add_argument("--models", nargs="*", help="only these of " + ", ".join(MODELS))
    ap.add_argument("--results", default="results", help="where cpu_regimes.{md,csv} go (default results)")
    args = ap.parse_args()
    layouts = [False, True] if shutil.which("setarch") else [False]
    start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for name, cfg in MODELS.items():
        if args.models and name not in args.models:
            continue
        windows = child(cfg, args.core, seconds=args.seconds, window_s=args.window_s)
        rows.append(
            row(
                name,
                f"one process, {args.window_s:g}-s windows over {args.seconds:g} s",
                windows,
                run_length_s=run_length_s(windows, args.window_s),
            )
        )
        print(f"{name}: windows done", flush=True)
        per: dict[bool, list[float]] = {off: [] for off in layouts}
        spreads: dict[bool, list[float]] = {off: [] for off in layouts}
        for _ in range(args.processes):  # the layouts alternate, so a load that comes and goes meets both alike
            for off in layouts:
                steps = child(cfg, args.core, steps=args.steps, no_aslr=off)
                med = statistics.median(steps)
                q = statistics.quantiles(steps, n=4)
                per[off].append(med)
                spreads[off].append((q[2] - q[0]) / med)
        for off in layouts:
            what = "fresh processes, " + ("one layout (setarch -R)" if off else "layout randomised (as run starts ranks)")
            rows.append(row(name, what, per[off], within_process_iqr_over_median=statistics.median(spreads[off])))
        print(f"{name}: processes done", flush=True)
    write(rows, args, start, os.getloadavg())
    return 0


def write(rows: list[dict[str, Any]], args: argparse.Namespace, start: tuple[float, ...], end: tuple[float, ...]) -> None:
    """results/cpu_regimes.md and .csv."""
    out = ROOT / args.results
    out.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "cpu_regimes.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)

    def pct(x: Any) -> str:
        return f"{x * 100:.0f}%" if isinstance(x, float) else "-"

    lines = [
        "<!-- written by benchmarks/cpu_regimes.py; do not edit -->",
        "# The same work's speed on this CPU over time and across processes (one thread, pinned)",
        "",
        f"`python benchmarks/cpu_regimes.py --seconds {args.seconds:g} --window-s {args.window_s:g} --processes "
        f"{args.processes} --steps {args.steps} --core {args.core}`: a held-back model's one-rank training step (N "
        "micro-batches of b samples, forward, backward, Adam), the thread's CPU seconds (waits for the core not "
        f"counted). Machine: {os.cpu_count()} cores ({platform.machine()}); load average (1, 5, 15 min) "
        f"{start[0]:.1f}, {start[1]:.1f}, {start[2]:.1f} at the start and {end[0]:.1f}, {end[1]:.1f}, {end[2]:.1f} at "
        "the end. A window's figure is the median step in it; a process's, the median of its timed steps.",
        "",
        "| model | what | samples | least ms | median ms | largest ms | largest / least | pairs over 25% apart | "
        "one speed lasts (median run of windows on one side of the median, s) | within one process: IQR / median | "
        "each (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        stay = f"{r['run_length_s']:.1f}" if "run_length_s" in r else "-"
        lines.append(
            f"| {r['model']} | {r['what']} | {r['samples']} | {r['least_ms']:.2f} | {r['median_ms']:.2f} | "
            f"{r['largest_ms']:.2f} | {r['largest_over_least']:.2f} | {pct(r['pairs_over_25pct_apart'])} | {stay} | "
            f"{pct(r.get('within_process_iqr_over_median'))} | {r['each_ms']} |"
        )
    (out / "cpu_regimes.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.results}/cpu_regimes.md", flush=True)


if __name__ == "__main__":
    sys.exit(main())
