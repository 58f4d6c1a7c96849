"""Run the calibration suite and write results/calibration.md, .csv, .svg and the measured profile.

    python benchmarks/calibration_report.py                      # full suite on the auto back-end
    python benchmarks/calibration_report.py --backend cupy       # on a GPU: results/calibration_gpu.md, .csv, .svg
    python benchmarks/calibration_report.py --time-quick         # also time `calibrate --quick` end to end
    python benchmarks/calibration_report.py --from-profile P.json  # re-render from a profile, measuring nothing
    python benchmarks/calibration_report.py --refit-profile P.json  # fit P's raw measurements anew, measuring nothing

Everything written names this script at the top.  The plot is a hand-written SVG (no
plotting library needed): measured points (filled: fitted, hollow: held out, grey: not
fitted) and the fitted line, per series, on log-log axes.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from milp_partition.calibration.backend import select_backend
from milp_partition.calibration.build import build_profile, measurements_of
from milp_partition.calibration.datasheets import DATASHEETS
from milp_partition.calibration.profile import (
    DeviceProfile,
    FitRecord,
    Measurement,
    datasheet_profile,
    load_profile,
    write_profile,
)
from milp_partition.calibration.settings import preset
from milp_partition.calibration.suite import run_suite
from milp_partition.cli.calibrate import ProgressBar

SCRIPT = "benchmarks/calibration_report.py"
REPO = Path(__file__).resolve().parents[1]
#: Panel size of the SVG plot in pixels, and panels per row.
PANEL_W, PANEL_H, PANELS_PER_ROW = 330, 240, 3


# -- which fit predicts which measurement ------------------------------------------------------


def _series_fit(profile: DeviceProfile, m: Measurement) -> FitRecord | None:
    names = {
        "gemm": f"gemm {m.label}",
        "copy": "copy",
        "scale_add": "scale_add",
        "reduction": "reduction",
        "allreduce": f"allreduce {m.label}",
    }
    name = names.get(m.benchmark, f"link {m.benchmark} {m.label}")
    return next((f for f in profile.fits if f.name == name), None)


def _x(m: Measurement) -> float:
    if m.benchmark == "gemm":
        return m.flops
    if m.benchmark == "allreduce":
        p = int(m.label.split("=")[1])
        return 2 * (p - 1) / p * m.bytes
    return m.bytes


def _predict(f: FitRecord, x: float) -> float:
    c = f.coefficients
    if "regime1_from_bytes" in c:  # piecewise: the regime that covers x
        k = 1
        while f"regime{k + 1}_from_bytes" in c and x >= c[f"regime{k + 1}_from_bytes"]:
            k += 1
        return c[f"regime{k}_alpha_s"] + x * c[f"regime{k}_beta_s_per_byte"]
    if "peak_flop_per_s" in c:
        return c["overhead_s"] + x / c["peak_flop_per_s"]
    if f.name.startswith("allreduce"):
        p = int(f.name.split("=")[1])
        return 2 * (p - 1) * c["alpha_s"] + x * c["beta_s_per_byte"]
    return c["alpha_s"] + x * c["beta_s_per_byte"]


def _fit_min_size(f: FitRecord) -> int:
    m = re.search(r">= (\d+) B", f.model) or re.search(r"\(n >= (\d+);", f.model)
    return int(m.group(1)) if m else 0


def _role(f: FitRecord | None, m: Measurement) -> str:
    if f is None:
        return "not fitted"
    if m.held_out:
        return "held out"
    if m.size >= _fit_min_size(f):
        return "fitted"
    return "not fitted (latency)" if m.benchmark == "gemm" else "not fitted (cache)"


def _profile_predict(profile: DeviceProfile, f: FitRecord, m: Measurement) -> float:
    """What the profile predicts for ``m``: its fit, and for a product never less than the launch latency."""
    t = _predict(f, _x(m))
    return max(t, profile.launch_latency_s) if m.benchmark == "gemm" else t


# -- output pieces ---------------------------------------------------------------------------------


def _g(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _effective(m: Measurement) -> str:
    if m.benchmark == "gemm":
        return f"{m.flops / m.time_s / 1e9:.3g} GFLOP/s"
    return f"{m.bytes / m.time_s / 1e9:.3g} GB/s"


def _bytes_text(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _reading(profile: DeviceProfile) -> list[str]:
    """Remarks computed from the fits, for a reader of the page."""
    fits = {f.name: f for f in profile.fits}
    out = []
    for dtype, rate in profile.compute.items():
        effs = ", ".join(
            f"n = {n}: {profile.flop_efficiency(2.0 * n**3, dtype):.0%}"
            for n in sorted({m.size for m in profile.measurements if m.benchmark == "gemm" and m.label == dtype})[::3]
        )
        out.append(
            f"- GEMM {dtype}: fitted peak {rate.peak_flop_per_s / 1e9:.4g} GFLOP/s; the fitted efficiency (fraction of that "
            f"peak) grows with size: {effs}."
        )
    copy, sa = fits.get("copy"), fits.get("scale_add")
    if copy and "regime1_from_bytes" in copy.coefficients:
        regimes = sum(1 for key in copy.coefficients if re.fullmatch(r"regime\d+_from_bytes", key))
        why = (
            "cache levels, memory, and non-temporal stores for the largest"
            if profile.backend == "numpy"
            else "on a GPU: sizes whose time is the launch latency, then the memory's bandwidth"
        )
        out.append(
            f"- Copies have {regimes} regimes ({why}), which one "
            f"alpha-beta line would average: each gets its own line ({_rate(copy)}; bytes read + written). A "
            "held-out size between two regimes is predicted by the lower one, hence the largest held-out errors at the "
            "knees; the transfers (h2d, d2h, d2d; memcpy on the CPU) are fitted the same way. A regime marked "
            "latency-bound is one where the bytes add less than its alpha up to the next regime: its slope is noise."
        )
    elif copy and sa and copy.holdout_median_rel_error and sa.holdout_median_rel_error:
        if copy.holdout_median_rel_error > 2 * sa.holdout_median_rel_error:
            lo = _fit_min_size(copy)
            ms = [m for m in profile.measurements if m.benchmark == "copy" and m.size >= lo]
            rates = [m.bytes / m.time_s / 1e9 for m in sorted(ms, key=lambda m: m.size)]
            out.append(
                f"- Copies are not one straight line even beyond the cache: the effective rate goes from "
                f"{min(rates):.3g} to {max(rates):.3g} GB/s over the fitted sizes (see the column below; on this CPU large "
                "copies get faster, as a memcpy that switches to non-temporal stores for copies large against the cache "
                f"would). One alpha-beta line averages the regimes, hence held-out errors of {copy.holdout_median_rel_error:.2f} "
                f"for copy against {sa.holdout_median_rel_error:.2f} for scale_add, an element-wise loop with one regime. "
                "The memcpy-based h2d/d2h/d2d series on the CPU behave like copy."
            )
    if profile.backend == "cupy":
        out.append(
            "- scale_add and reduction (records, not used for costs) are one alpha-beta line each over every size, most "
            "of them latency-bound on a GPU: their slopes are set by a few large sizes and the small sizes' noise, so "
            "read the effective rates of their largest sizes below rather than their fitted bandwidths."
        )
    if profile.backend == "numpy":
        out.append(
            "- On the CPU, arrays under 8 MiB run at cache speed: the scale_add and reduction lines (kept as records, "
            "not used for costs) cover only memory-resident sizes (grey in the plot, `not fitted (cache)` below), while "
            "copy and the transfers fit every size by regimes."
        )
    return out


def _rate(f: FitRecord) -> str:
    c = f.coefficients
    if "peak_flop_per_s" in c:
        return f"peak {c['peak_flop_per_s'] / 1e9:.4g} GFLOP/s, overhead {c['overhead_s'] * 1e6:.3g} us"
    if "regime1_from_bytes" in c:
        k, parts = 1, []
        while f"regime{k}_from_bytes" in c:
            alpha, beta = c[f"regime{k}_alpha_s"], c[f"regime{k}_beta_s_per_byte"]
            end = c.get(f"regime{k + 1}_from_bytes")
            if end is not None and end * beta < alpha:  # the bytes add less than alpha up to the next regime
                parts.append(f"from {_bytes_text(c[f'regime{k}_from_bytes'])}: latency-bound, alpha {alpha * 1e6:.3g} us")
            else:
                parts.append(
                    f"from {_bytes_text(c[f'regime{k}_from_bytes'])}: {1e-9 / beta:.4g} GB/s, alpha {alpha * 1e6:.3g} us"
                )
            k += 1
        return "; ".join(parts)
    return f"{c['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s, alpha {c['alpha_s'] * 1e6:.3g} us"


def write_csv(profile: DeviceProfile, path: Path) -> None:
    with path.open("w", newline="") as fh:
        fh.write(f"# written by {SCRIPT}; profile {profile.name} ({profile.backend}, {profile.created_utc})\n")
        w = csv.writer(fh)
        w.writerow(["benchmark", "label", "size", "flops", "bytes", "time_s", "predicted_s", "rel_error", "role", "times_s"])
        for m in profile.measurements:
            f = _series_fit(profile, m)
            pred = _profile_predict(profile, f, m) if f else math.nan
            w.writerow(
                [
                    m.benchmark,
                    m.label,
                    m.size,
                    m.flops,
                    m.bytes,
                    f"{m.time_s:.6g}",
                    f"{pred:.6g}",
                    f"{abs(pred - m.time_s) / m.time_s:.4f}" if f else "",
                    _role(f, m),
                    ";".join(f"{t:.6g}" for t in m.times_s),
                ]
            )


def write_svg(profile: DeviceProfile, path: Path) -> None:
    """Measured against fitted, one log-log panel per fitted series."""
    series: dict[str, list[Measurement]] = {}
    for m in profile.measurements:
        f = _series_fit(profile, m)
        if f is not None:
            series.setdefault(f.name, []).append(m)
    names = [f.name for f in profile.fits if f.name in series]
    rows = math.ceil(len(names) / PANELS_PER_ROW)
    width, height = PANEL_W * PANELS_PER_ROW, PANEL_H * rows + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f"<!-- written by {SCRIPT} -->",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="13">{_esc(profile.name)} ({profile.backend}): measured median times '
        "(filled: fitted, hollow: held out, grey: not fitted) and the fitted line; log-log</text>",
    ]
    for k, name in enumerate(names):
        ms = sorted(series[name], key=_x)
        f = next(f for f in profile.fits if f.name == name)
        ox, oy = (k % PANELS_PER_ROW) * PANEL_W, 30 + (k // PANELS_PER_ROW) * PANEL_H
        floor = profile.launch_latency_s if "peak_flop_per_s" in f.coefficients else 0.0
        out += _panel(name, f, ms, ox, oy, floor)
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _panel(name: str, f: FitRecord, ms: list[Measurement], ox: float, oy: float, floor_s: float = 0.0) -> list[str]:
    """One series' panel; ``floor_s``: the least time the profile predicts (a product's launch latency)."""
    left, top, w, h = ox + 55, oy + 22, PANEL_W - 75, PANEL_H - 65
    xs = np.array([_x(m) for m in ms])
    ts = np.array([m.time_s for m in ms])
    grid = np.geomspace(xs.min(), xs.max(), 60)
    preds = np.array([max(_predict(f, x), floor_s) for x in grid])
    lx0, lx1 = math.floor(math.log10(xs.min())), math.ceil(math.log10(xs.max()))
    ly0 = math.floor(math.log10(min(ts.min(), preds.min())))
    ly1 = math.ceil(math.log10(max(ts.max(), preds.max())))
    lx1, ly1 = max(lx1, lx0 + 1), max(ly1, ly0 + 1)

    def px(x: float) -> float:
        return left + (math.log10(x) - lx0) / (lx1 - lx0) * w

    def py(t: float) -> float:
        return top + h - (math.log10(t) - ly0) / (ly1 - ly0) * h

    unit = "FLOPs" if "peak_flop_per_s" in f.coefficients else "bytes"
    parts = [
        f'<text x="{ox + 10}" y="{oy + 14}" font-size="12" font-weight="bold">{_esc(name)}</text>',
        f'<text x="{ox + PANEL_W - 10}" y="{oy + 14}" text-anchor="end">R^2 {_g(f.r2, 4)}, held-out med {_g(f.holdout_median_rel_error, 2)}</text>',
        f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
        f'<text x="{left + w / 2}" y="{top + h + 32}" text-anchor="middle">{unit}</text>',
        f'<text x="{ox + 12}" y="{top + h / 2}" transform="rotate(-90 {ox + 12} {top + h / 2})" text-anchor="middle">seconds</text>',
    ]
    step_x = max(1, (lx1 - lx0) // 6)
    for e in range(lx0, lx1 + 1, step_x):
        x = left + (e - lx0) / (lx1 - lx0) * w
        parts.append(f'<line x1="{x:.1f}" y1="{top + h}" x2="{x:.1f}" y2="{top + h + 4}" stroke="#999"/>')
        parts.append(f'<text x="{x:.1f}" y="{top + h + 16}" text-anchor="middle">1e{e}</text>')
    step_y = max(1, (ly1 - ly0) // 5)
    for e in range(ly0, ly1 + 1, step_y):
        y = top + h - (e - ly0) / (ly1 - ly0) * h
        parts.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#999"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
    lo = _fit_min_size(f)
    fitted_grid = [(x, p) for x, p in zip(grid, preds) if p > 0]
    path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(p):.1f}" for i, (x, p) in enumerate(fitted_grid))
    parts.append(f'<path d="{path}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    for m in ms:
        cx, cy = px(_x(m)), py(m.time_s)
        if m.held_out:
            style = 'fill="white" stroke="#ff7f0e" stroke-width="1.5"'
        elif m.size < lo:
            style = 'fill="#bbb" stroke="none"'
        else:
            style = 'fill="#1f77b4" stroke="none"'
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.2" {style}/>')
    return parts


def _datasheet_rows() -> list[str]:
    rows = [
        "| device | memory | dense peak FLOP/s (datasheet) | HBM | NVLink / direction | PCIe / direction | GEMM 8192^3 bf16 or fp16 | GEMM 8192^3 fp32 | 1 GB h2d | all-reduce 1 GB, 8 GPUs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    n = 8192
    for key, sheet in DATASHEETS.items():
        p = datasheet_profile(key)
        half = "bfloat16" if "bfloat16" in p.compute else "float16"
        peaks = ", ".join(f"{k} {v / 1e12:g} T" for k, v in sheet.peak_flop_per_s.items())
        rows.append(
            f"| {p.name} | {sheet.memory_bytes / 1e9:g} GB | {peaks} | {sheet.memory_bandwidth_bytes_per_s / 1e9:g} GB/s | "
            f"{sheet.nvlink_bytes_per_s_per_direction / 1e9:g} GB/s | {sheet.pcie_bytes_per_s_per_direction / 1e9:g} GB/s | "
            f"{p.compute_time_s(2.0 * n**3, 3 * n * n * 2, half) * 1e3:.2f} ms ({half}) | "
            f"{p.compute_time_s(2.0 * n**3, 3 * n * n * 4, 'float32') * 1e3:.1f} ms | "
            f"{p.transfer_time_s(1e9, 'h2d') * 1e3:.1f} ms | {p.allreduce_time_s(1e9, 8) * 1e3:.2f} ms |"
        )
    return rows


def _datasheet_comparison(profile: DeviceProfile) -> list[str]:
    """Measured against the datasheet profile of the same GPU, where one matches the device's name."""
    key = next((k for k in DATASHEETS if k.lower() in profile.name.lower()), None) if profile.backend == "cupy" else None
    if key is None:
        return []
    sheet, data = datasheet_profile(key), DATASHEETS[key]
    rows = []

    def largest(benchmark: str, label: str | None = None) -> Measurement | None:
        ms = measurements_of(profile, benchmark, label)
        return ms[-1] if ms else None

    for dtype, rate in profile.compute.items():
        m = largest("gemm", dtype)
        peak = data.peak_flop_per_s.get(dtype)
        if m is None or peak is None:
            continue
        rows.append(
            (
                f"gemm {dtype}, n = {m.size}",
                m.time_s,
                sheet.compute_rate(dtype).time_s(m.flops),
                f"fitted peak {rate.peak_flop_per_s / 1e12:.4g} TFLOP/s = {rate.peak_flop_per_s / peak:.0%} of the datasheet's "
                f"{peak / 1e12:g}",
            )
        )
    m = largest("copy")
    if m is not None:
        bw = 1.0 / profile.memory.beta_s_per_byte
        rows.append(
            (
                f"copy {_bytes_text(m.size)} (bytes read + written)",
                m.time_s,
                sheet.memory.time_s(m.bytes),
                f"fitted {bw / 1e9:.4g} GB/s = {bw / data.memory_bandwidth_bytes_per_s:.0%} of the datasheet's "
                f"{data.memory_bandwidth_bytes_per_s / 1e9:g} GB/s",
            )
        )
    for kind in ("h2d", "d2h"):
        m = largest(kind)
        if m is not None:
            bw = 1.0 / profile.links[kind].beta_s_per_byte
            rows.append(
                (
                    f"{kind} {_bytes_text(m.size)}",
                    m.time_s,
                    sheet.transfer_time_s(m.bytes, kind),
                    f"fitted {bw / 1e9:.4g} GB/s = {bw / data.pcie_bytes_per_s_per_direction:.0%} of PCIe's "
                    f"{data.pcie_bytes_per_s_per_direction / 1e9:g} GB/s one way",
                )
            )
    rows.append(("almost-empty kernel", profile.launch_latency_s, sheet.launch_latency_s, "launch latency"))
    lines = [
        "## Measured against the datasheet profile",
        "",
        f"The largest measured size of each series against what the `{key}` datasheet profile "
        f"(`milp-partition ... --profile {key}`) predicts for it, with its stated assumptions (below). A ratio above 1: "
        "the datasheet profile is optimistic.",
        "",
        "| series | measured | datasheet profile | measured / datasheet | fitted rate |",
        "|---|---|---|---|---|",
    ]
    for name, measured, predicted, note in rows:
        lines.append(f"| {name} | {measured:.4g} s | {predicted:.4g} s | {measured / predicted:.2f} | {note} |")
    return [*lines, ""]


def write_markdown(profile: DeviceProfile, path: Path, context: dict[str, str]) -> None:
    fits = profile.fits
    held = [
        abs(_profile_predict(profile, f, m) - m.time_s) / m.time_s
        for m in profile.measurements
        if m.held_out and (f := _series_fit(profile, m)) is not None
    ]
    lines = [
        "# Cost-model calibration",
        "",
        f"Written by `{SCRIPT}` ({context['command']}) on {context['date']}; do not edit by hand.",
        "",
        "## This run",
        "",
        f"- device: **{profile.name}**, backend `{profile.backend}`, source `{profile.source}`, suite preset "
        f"`{profile.versions.get('suite_preset', '?')}`; profile written to `{context['profile_path']}`",
        f"- versions: {', '.join(f'{k} {v}' for k, v in profile.versions.items() if k not in ('suite_preset',))}",
        f"- {context['load']}",
    ]
    if context.get("quick"):
        lines.append(f"- {context['quick']}")
    lines += [f"- {n}" for n in profile.notes if not n.startswith("suite wall time")]
    lines += [
        "",
        "No GPU was available to this run; the CuPy path (CUDA-event timing, pinned host buffers, peer copies, "
        "NCCL all-reduce) is the same suite over `cupy` and its tests skip without cupy and a GPU."
        if profile.backend == "numpy"
        else "",
        "",
        "## Fits",
        "",
        "Each series is fitted by least squares on relative residuals (`milp_partition/calibration/fit.py`); every third "
        "size (never the first or last) is held out of the fit and predicted. R^2 and the largest relative residual are "
        "over the fitted points.",
        "",
        "| fit | model | coefficients | R^2 | max rel. residual | points fitted / held out | held-out median / max rel. error |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in fits:
        lines.append(
            f"| {f.name} | `{f.model}` | {_rate(f)} | {_g(f.r2, 4)} | {_g(f.max_rel_residual, 2)} | {f.n_points} / {f.n_holdout} | "
            f"{_g(f.holdout_median_rel_error, 2)} / {_g(f.holdout_max_rel_error, 2)} |"
        )
    if held:
        lines += [
            "",
            f"All {len(held)} held-out points together: median relative error **{np.median(held):.3f}**, largest **{max(held):.3f}**.",
        ]
    lines += [
        "",
        f"Launch latency (almost-empty kernel{'; on NumPy the overhead of a tiny operation' if profile.backend == 'numpy' else ''}): "
        f"{profile.launch_latency_s * 1e6:.3g} us. All-reduce: {profile.allreduce.note}.",
        "",
        f"![measured against fitted]({context['svg_name']})",
        "",
        "### Reading the fits",
        "",
        *_reading(profile),
        "",
        *_datasheet_comparison(profile),
        "## Measurements",
        "",
        f"Every median with its prediction is in `{context['csv_name']}` (every repeat too); the profile JSON holds them as well.",
        "",
        "| series | size | median time | effective rate | fitted | rel. error | role |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in profile.measurements:
        f = _series_fit(profile, m)
        pred = _profile_predict(profile, f, m) if f else math.nan
        err = abs(pred - m.time_s) / m.time_s if f else math.nan
        lines.append(
            f"| {m.benchmark} {m.label} | {m.size} | {m.time_s:.4g} s | {_effective(m)} | {_g(pred, 4)} s | {_g(err, 2)} | {_role(f, m)} |"
        )
    lines += [
        "",
        "## Datasheet profiles",
        "",
        "Vendor numbers (sources in `milp_partition/calibration/datasheets.py`); times below are what the profiles predict "
        "under the stated assumptions, not measurements.",
        "",
        *_datasheet_rows(),
        "",
        "Assumptions (the same for every datasheet profile):",
        "",
        *[f"- {a}" for a in datasheet_profile("H100").assumptions],
        "",
        "## Reproduce",
        "",
        "```bash",
        "milp-partition calibrate --backend numpy --quick --output profile.json   # under a minute",
        f"python {SCRIPT} --time-quick                        # calibration.md (full suite on the CPU, about 3 minutes)",
        f"python {SCRIPT} --backend cupy                      # calibration_gpu.md (full suite on a GPU, about a minute)",
        "```",
        "",
    ]
    path.write_text("\n".join(line for line in lines) + "\n")


def _time_quick(backend: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "milp_partition", "calibrate", "--backend", backend, "--quick", "--no-progress"]
        proc = subprocess.run([*cmd, "--output", str(Path(tmp) / "q.json")], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    return (
        f"`milp-partition calibrate --backend {backend} --quick` end to end: **{wall:.1f} s** wall ({status}; "
        f"1-minute load average {load0:.1f} before, {load1:.1f} after, on {os.cpu_count()} cores)"
    )


class _StoredBackend:
    """Stands in for the back-end that measured a stored profile: its name, device, memory, versions and notes."""

    def __init__(self, profile: DeviceProfile) -> None:
        self.name = profile.backend
        self.device_name = profile.name
        self.memory_bytes = profile.memory_bytes
        self._versions = {k: v for k, v in profile.versions.items() if k != "suite_preset"}
        self._notes = {kind: ab.note.split(" (")[0] for kind, ab in profile.links.items()}

    def versions(self) -> dict[str, str]:
        return dict(self._versions)

    def transfer_notes(self) -> dict[str, str]:
        return dict(self._notes)


def refit(profile: DeviceProfile) -> DeviceProfile:
    """``profile``'s raw measurements fitted anew by :func:`build_profile` (same preset settings, nothing measured)."""
    from dataclasses import replace

    from milp_partition.calibration.suite import SuiteResult

    settings = preset(profile.versions.get("suite_preset", "full"), profile.backend)
    measurements = tuple(replace(m, held_out=False) for m in profile.measurements)
    notes = tuple(n for n in profile.notes if not n.startswith("suite wall time"))
    seconds = next((float(n.split()[3]) for n in profile.notes if n.startswith("suite wall time")), 0.0)
    new = build_profile(_StoredBackend(profile), settings, SuiteResult(measurements, notes, seconds))  # type: ignore[arg-type]
    return replace(new, created_utc=profile.created_utc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"])
    ap.add_argument("--preset", default="full", choices=["full", "quick", "tiny"])
    ap.add_argument("--out-dir", type=Path, default=REPO / "results")
    ap.add_argument(
        "--name",
        help="stem of the .md, .csv and .svg written (default: calibration_gpu for a CuPy profile, else calibration)",
    )
    ap.add_argument("--time-quick", action="store_true", help="also time `calibrate --quick` end to end")
    ap.add_argument("--from-profile", type=Path, help="render from this profile JSON instead of measuring")
    ap.add_argument(
        "--refit-profile", type=Path, help="fit this profile's raw measurements with the current fitting code (no measuring)"
    )
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    command = "python " + " ".join([SCRIPT, *(argv if argv is not None else sys.argv[1:])])
    if args.from_profile is not None:
        profile = load_profile(args.from_profile)
        load = "rendered from an existing profile (no measurement in this run)"
        profile_path = args.from_profile
    elif args.refit_profile is not None:
        old = load_profile(args.refit_profile)
        profile = refit(old)
        profile_path = args.out_dir / f"calibration_profile_{old.backend}.json"
        write_profile(profile, profile_path)
        load = (
            f"refitted from the raw measurements of `{args.refit_profile.name}` (measured {old.created_utc}; "
            f"{next((n for n in old.notes if n.startswith('suite wall time')), 'suite time not recorded')}); "
            "nothing measured in this run"
        )
    else:
        backend = select_backend(args.backend)
        settings = preset(args.preset, backend.name)
        load0 = os.getloadavg()
        result = run_suite(backend, settings, ProgressBar(sys.stderr))
        load1 = os.getloadavg()
        profile = build_profile(backend, settings, result)
        profile_path = args.out_dir / f"calibration_profile_{backend.name}.json"
        write_profile(profile, profile_path)
        load = (
            f"suite wall time {result.seconds:.1f} s; 1-minute load average {load0[0]:.1f} at the start and {load1[0]:.1f} "
            f"at the end on {os.cpu_count()} cores (the machine is shared)"
        )
    name = args.name or ("calibration_gpu" if profile.backend == "cupy" else "calibration")
    context = {
        "command": f"`{command}`",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": load,
        "profile_path": str(Path(profile_path).resolve().relative_to(REPO))
        if Path(profile_path).resolve().is_relative_to(REPO)
        else str(profile_path),
        "svg_name": f"{name}.svg",
        "csv_name": f"{name}.csv",
    }
    if args.time_quick:
        context["quick"] = _time_quick(profile.backend if profile.backend != "datasheet" else "numpy")
    write_csv(profile, args.out_dir / f"{name}.csv")
    write_svg(profile, args.out_dir / f"{name}.svg")
    write_markdown(profile, args.out_dir / f"{name}.md", context)
    print(f"wrote {args.out_dir / (name + '.md')}, {name}.csv, {name}.svg, {profile_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
