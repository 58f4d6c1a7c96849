"""Writes the held-back settings of the heterogeneous benchmark (issue 40): ``benchmarks/hetero_heldback/*.json``.

The shared settings (``../shared/benchmarks/hetero/reference/settings.json``) are five; issue 40 asks for the same
bars on settings held back from them.  This script chooses them by a fixed rule over the material of Sailor's folder
(its cluster traces, its two models' default global batches), written down here before any of them was solved:

1. **Trace rows.** Every data row of every trace CSV in ``clusters/``, files in name order, rows in order: j = 0..9
   (``gpu_trace_2zones_2gpus`` row 0; ``gpu_trace_heterogeneous_imbalanced`` rows 0-2; ``gpu_trace_multizone``
   rows 0-2; ``gpu_trace_scaled`` rows 0-2).
2. **Model.** GPT-Neo-2.7 for even j, OPT-350 for odd j (both models, alternating).
3. **Global batch.** The model's default (``training_config_*.json``: 2048 for GPT-Neo-2.7, 1024 for OPT-350) times
   (1, 1/2, 2)[j mod 3] (other global batches, cycling).
4. **Small clusters.** The traces' rows hold 32-640 devices; two small settings come from the rows with two GPU kinds
   whose j is 0 and 3 (the four-column row and the largest two-kind row), every count divided by 16 (rounded
   down), with the model and batch that rule 2 and 3 give j + 1 (so that they differ from their large sibling).
5. A setting equal to a shared one (same model, batch and devices) would be dropped; with the rules above none is
   (the shared settings use the imbalanced trace's rows 0 and 1 with OPT-350 at 1024 and row 0 with GPT-Neo-2.7 at
   2048; rule 2 and 3 give row 0 OPT-350 at 512 and row 1 GPT-Neo-2.7 at 4096).

That is 12 settings: 1 to 5 (kind, zone) columns (the four-column row mixes A100-40 and V100-16 over two zones, the
multi-zone rows hold A100-40 in five zones), 32 to 640 devices, both models, three global batches.  Each file is in
the project's setting format (``milp-partition-hetero/1``: ``folder`` relative to the file, ``name``, ``model``,
``global_batch``, ``gpus``), which ``milp-partition solve ../shared/benchmarks/hetero --setting-file FILE`` and
``milp-partition gap FILE --problem hetero`` take.  ``benchmarks/hetero_bench.py --held-back`` benchmarks them.

Run from the repository root (rewrites the folder; the files are deterministic)::

    python benchmarks/hetero_heldback_settings.py
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HETERO = ROOT.parent / "shared" / "benchmarks" / "hetero"
OUT = ROOT / "benchmarks" / "hetero_heldback"
SCRIPT = "benchmarks/hetero_heldback_settings.py"
FORMAT = "milp-partition-hetero/1"
MODELS = ("GPT-Neo-2.7", "OPT-350")  # rule 2: index j mod 2
DEFAULT_BATCH = {"GPT-Neo-2.7": 2048, "OPT-350": 1024}  # training_config_*.json global_batch_size
BATCH_FACTORS = (1.0, 0.5, 2.0)  # rule 3: index j mod 3
SMALL_FROM = (0, 3)  # rule 4: the j of the two-kind rows scaled down
SMALL_DIVISOR = 16


def trace_rows(folder: Path) -> list[tuple[str, int, dict[str, int]]]:
    """Rule 1: (file name, row, devices per ``<kind>_<zone>``) for every data row of every trace, in order."""
    out = []
    for path in sorted((folder / "clusters").glob("*.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
        head = rows[0]
        for r, vals in enumerate(rows[1:]):
            out.append((path.name, r, {k: int(float(v)) for k, v in zip(head[2:], vals[2:])}))
    return out


def model_and_batch(j: int) -> tuple[str, int]:
    """Rules 2 and 3."""
    model = MODELS[j % 2]
    return model, int(DEFAULT_BATCH[model] * BATCH_FACTORS[j % 3])


def _short(model: str) -> str:
    return {"GPT-Neo-2.7": "gptneo", "OPT-350": "opt350"}[model]


def _label(gpus: dict[str, int]) -> str:
    """``a32-v96`` style, with a zone letter when a kind spans several zones (``a8a8-v8v8``, ``a32x5``)."""
    by_kind: dict[str, list[int]] = {}
    for col, n in gpus.items():
        by_kind.setdefault(col.split("_")[0], []).append(n)
    parts = []
    for kind, counts in by_kind.items():
        k = kind[0].lower()
        if len(set(counts)) == 1 and len(counts) > 1:
            parts.append(f"{k}{counts[0]}x{len(counts)}")
        else:
            parts.append("".join(f"{k}{n}" for n in counts))
    return "-".join(parts)


def held_back(folder: Path) -> list[dict[str, object]]:
    """The settings of rules 1-5, each with where it comes from (``trace_row``) and its rule."""
    shared = json.loads((folder / "reference" / "settings.json").read_text())["settings"]
    shared_keys = {(s["model"], s["global_batch"], json.dumps(s["gpus"], sort_keys=True)) for s in shared}
    rows = trace_rows(folder)
    out: list[dict[str, object]] = []
    for j, (fname, r, gpus) in enumerate(rows):
        model, batch = model_and_batch(j)
        out.append(_setting(model, batch, gpus, f"{fname} row {r}", f"rules 1-3, j = {j}"))
    for j in SMALL_FROM:
        fname, r, gpus = rows[j]
        model, batch = model_and_batch(j + 1)
        small = {k: n // SMALL_DIVISOR for k, n in gpus.items()}
        out.append(_setting(model, batch, small, f"{fname} row {r}, counts / {SMALL_DIVISOR}", f"rule 4, j = {j}"))
    return [s for s in out if (s["model"], s["global_batch"], json.dumps(s["gpus"], sort_keys=True)) not in shared_keys]


def _setting(model: str, batch: int, gpus: dict[str, int], source: str, rule: str) -> dict[str, object]:
    return {
        "name": f"{_short(model)}-{_label(gpus)}-b{batch}",
        "model": model,
        "global_batch": batch,
        "gpus": gpus,
        "trace_row": source,
        "rule": rule,
    }


def main() -> int:
    settings = held_back(HETERO)
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    folder = Path("..") / ".." / ".." / "shared" / "benchmarks" / "hetero"  # relative to a file in OUT
    lines = [
        f"<!-- written by {SCRIPT}; do not edit by hand -->",
        "",
        "# Held-back heterogeneous settings (issue 40)",
        "",
        f"Chosen by the rule in `{SCRIPT}` (its docstring); benchmarked by `benchmarks/hetero_bench.py --held-back` "
        "into `results/hetero_heldback.md`.",
        "",
        "| file | model | global batch | devices per `<kind>_<zone>` | from |",
        "|---|---|---|---|---|",
    ]
    for s in settings:
        data = {"format": FORMAT, "folder": str(folder), **{k: s[k] for k in ("name", "model", "global_batch", "gpus")}}
        (OUT / f"{s['name']}.json").write_text(json.dumps(data, indent=1) + "\n")
        gpus = ", ".join(f"{k} {n}" for k, n in s["gpus"].items())  # type: ignore[attr-defined]
        lines.append(f"| `{s['name']}.json` | {s['model']} | {s['global_batch']} | {gpus} | {s['trace_row']} ({s['rule']}) |")
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    print(f"{len(settings)} settings in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
