"""From the suite's measurements to a measured :class:`DeviceProfile`: one fit per series.

=============  =========================  ==========================================
series         x of the fit               profile field
=============  =========================  ==========================================
gemm <dtype>   FLOPs (2 n^3), n >= n0     ``compute[dtype]`` = (overhead_s, 1 / beta)
copy           bytes read + written       ``memory``: piecewise alpha-beta over all sizes (regimes)
scale_add      bytes read + written       (fit record only)
reduction      bytes read                 (fit record only)
empty          --                         ``launch_latency_s`` (median)
h2d, d2h       bytes                      ``links["h2d"]``, ``links["d2h"]``: piecewise, as copy
d2d <pair>     bytes                      ``links["d2d"]`` = the slowest pair (largest beta at the largest sizes)
allreduce      2 (p-1)/p * bytes          ``allreduce`` (alpha per ring step = intercept / (2 (p-1)))
=============  =========================  ==========================================

A GEMM series is fitted from the smallest order ``n0`` from which every product takes at least
:data:`COMPUTE_BOUND_FACTOR` times the series' fastest (at least :data:`~milp_partition.calibration.fit.MIN_FIT_POINTS`
+ 1 orders): below it a product's time is the launch's, flat in n (in one run on an H200, 18-26 us up to n = 2048
in float16), and a line through those points would trade a smaller overhead for a peak above anything measured (902
TFLOP/s where no product ran faster than 767).  The profile prices the smaller products by its launch latency
(:meth:`DeviceProfile.compute_time_s` takes the larger).

Copies and transfers have regimes (on a CPU: within a cache level, from memory, and with
non-temporal stores for the largest), which one line averages; they are fitted piecewise
(:func:`~milp_partition.calibration.fit.fit_piecewise`: a regime per size range, each an
alpha-beta line).  Without a measured all-reduce (one device, or no NCCL) the ring model prices each step as a
``d2d`` copy, and ``allreduce.note`` says so.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

import numpy as np

from milp_partition.calibration.backend import ArrayBackend
from milp_partition.calibration.fit import MIN_FIT_POINTS, FitError, LineFit, PiecewiseFit, fit_line, fit_piecewise
from milp_partition.calibration.profile import AlphaBeta, ComputeRate, DeviceProfile, FitRecord, Measurement, Regime
from milp_partition.calibration.settings import SuiteSettings
from milp_partition.calibration.suite import SuiteResult

AB_MODEL = "time_s = alpha_s + bytes * beta_s_per_byte"
GEMM_MODEL = "time_s = overhead_s + flops / peak_flop_per_s"
RING_MODEL = "time_s = 2 (p-1) alpha_s + 2 (p-1)/p * bytes * beta_s_per_byte"
#: What a FitError of a series tells the user to do.
_FIT_ADVICE = (
    "over these sizes the time is all overhead (or noise); measure larger sizes (the full suite, "
    "or a preset whose largest sizes take well over the launch latency)"
)


#: A GEMM order is compute-bound when its product takes at least this many times the series' fastest product.
COMPUTE_BOUND_FACTOR = 2.0


def compute_bound_from(ms: list[Measurement]) -> int:
    """The smallest order from which every product of ``ms`` (one GEMM series) is compute-bound.

    The smallest order when only the fastest product is under the bar (no flat head).  At least
    ``MIN_FIT_POINTS + 1`` orders are kept (the largest ones), so the fit has points to hold out.
    """
    by_size = sorted(ms, key=lambda m: m.size)
    if not by_size:
        return 0
    floor = min(m.time_s for m in by_size)
    cut = len(by_size)
    while cut > 0 and by_size[cut - 1].time_s >= COMPUTE_BOUND_FACTOR * floor:
        cut -= 1
    if cut < 2:  # the fastest product alone: no flat head to leave out (a CPU's series grow from the first order)
        cut = 0
    cut = min(cut, max(0, len(by_size) - (MIN_FIT_POINTS + 1)))
    return by_size[cut].size


def _size_range(ms: list[Measurement]) -> str:
    sizes = [m.size for m in ms]
    return f"{len(sizes)} sizes, {min(sizes)} to {max(sizes)}" if sizes else "no sizes"


def _record(name: str, model: str, coefficients: dict[str, float], f: LineFit) -> FitRecord:
    return FitRecord(
        name=name,
        model=model,
        coefficients=coefficients,
        r2=f.r2,
        max_rel_residual=f.max_rel_residual,
        n_points=f.n_points,
        n_holdout=f.n_holdout,
        holdout_median_rel_error=f.holdout_median_rel_error,
        holdout_max_rel_error=f.holdout_max_rel_error,
    )


def _ab_coefficients(f: LineFit) -> dict[str, float]:
    return {"alpha_s": f.alpha, "beta_s_per_byte": f.beta, "bandwidth_bytes_per_s": 1.0 / f.beta}


def _regime_coefficients(f: PiecewiseFit) -> dict[str, float]:
    """``alpha_s``/``beta_s_per_byte`` of the largest sizes' regime, then ``regime<k>_from_bytes|alpha_s|beta_s_per_byte``."""
    out = {"alpha_s": f.alphas[-1], "beta_s_per_byte": f.betas[-1], "bandwidth_bytes_per_s": 1.0 / f.betas[-1]}
    for k, (start, alpha, beta) in enumerate(zip(f.starts, f.alphas, f.betas), 1):
        out.update({f"regime{k}_from_bytes": start, f"regime{k}_alpha_s": alpha, f"regime{k}_beta_s_per_byte": beta})
    return out


def _alpha_beta(f: PiecewiseFit, note: str) -> AlphaBeta:
    regimes = tuple(Regime(s, a, b) for s, a, b in zip(f.starts, f.alphas, f.betas)) if len(f.starts) > 1 else ()
    return AlphaBeta(f.alphas[-1], f.betas[-1], note, regimes)


PIECEWISE_MODEL = "piecewise: time_s = alpha_k + bytes * beta_k for bytes in regime k"


def _ring_bytes(p: int, m: Measurement) -> float:
    """Bytes each device sends in a ring all-reduce of ``m.bytes`` over ``p`` devices."""
    return 2 * (p - 1) / p * m.bytes


def _participants(label: str) -> int:
    return int(label.split("=", 1)[1])


def build_profile(backend: ArrayBackend, settings: SuiteSettings, result: SuiteResult) -> DeviceProfile:
    """Fit every series of ``result`` and assemble the measured profile of ``backend``'s device.

    Raises
    ------
    FitError
        A series cannot be fitted.
    """
    measurements, fits, pieces, compute, records, fit_notes = _fit_series(settings, result)

    notes_t = backend.transfer_notes()

    def link(kind: str) -> AlphaBeta:
        keys = [k for k in pieces if k[0] == kind]
        slowest = max(keys, key=lambda k: pieces[k].betas[-1])
        note = notes_t[kind] + (f" ({slowest[1]})" if len(keys) > 1 else "")
        return _alpha_beta(pieces[slowest], note)

    links = {kind: link(kind) for kind in ("h2d", "d2h", "d2d")}
    ar_keys = [k for k in fits if k[0] == "allreduce"]
    if ar_keys:
        key = ar_keys[0]
        p = _participants(key[1])
        allreduce = AlphaBeta(fits[key].alpha / (2 * (p - 1)), fits[key].beta, f"NCCL ring all-reduce over {p} GPUs (measured)")
    else:
        allreduce = AlphaBeta(
            links["d2d"].alpha_s, links["d2d"].beta_s_per_byte, "not measured: each ring step priced as a d2d copy"
        )
    copy_fit = pieces[("copy", "float32")]
    empty = [m for m in measurements if m.benchmark == "empty"]
    versions = dict(backend.versions())
    versions["suite_preset"] = settings.preset
    return DeviceProfile(
        name=backend.device_name,
        source="measured",
        backend=backend.name,
        memory_bytes=backend.memory_bytes,
        launch_latency_s=float(statistics.median(m.time_s for m in empty)),
        compute=compute,
        memory=_alpha_beta(copy_fit, "copy kernel, bytes = read + written; piecewise by size regime"),
        links=links,
        allreduce=allreduce,
        fits=tuple(records),
        measurements=tuple(measurements),
        versions=versions,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        assumptions=(),
        notes=(*result.notes, *fit_notes, f"suite wall time {result.seconds:.1f} s"),
    )


def _fit_series(
    settings: SuiteSettings, result: SuiteResult
) -> tuple[
    list[Measurement],
    dict[tuple[str, str], LineFit],
    dict[tuple[str, str], PiecewiseFit],
    dict[str, ComputeRate],
    list[FitRecord],
    list[str],
]:
    """Fit every (benchmark, label) series of ``result``.

    Returns the measurements (held-out points marked), the line and piecewise fits by series,
    the compute rate per data type, the fit records (in the order the series first appear) and notes on
    record-only series that could not be fitted.

    Raises
    ------
    FitError
        A series the profile needs cannot be fitted; the message names it and its sizes.
    """
    series: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, m in enumerate(result.measurements):
        series[(m.benchmark, m.label)].append(i)
    measurements = list(result.measurements)
    fits: dict[tuple[str, str], LineFit] = {}
    pieces: dict[tuple[str, str], PiecewiseFit] = {}
    records: list[FitRecord] = []
    notes: list[str] = []

    def fit(key: tuple[str, str], x_of: Callable[[Measurement], float], min_size: int = 0) -> LineFit:
        idx = [i for i in series[key] if measurements[i].size >= min_size]
        ms = [measurements[i] for i in idx]
        try:
            f = fit_line(np.array([x_of(m) for m in ms]), np.array([m.time_s for m in ms]), settings.holdout_every)
        except FitError as exc:
            raise FitError(f"{key[0]} {key[1]} ({_size_range(ms)}): {exc}; {_FIT_ADVICE}") from None
        for i, held in zip(idx, f.held_out):
            measurements[i] = replace(measurements[i], held_out=held)
        fits[key] = f
        return f

    def fit_regimes(key: tuple[str, str]) -> PiecewiseFit:
        idx = series[key]
        ms = [measurements[i] for i in idx]
        try:
            f = fit_piecewise(np.array([m.bytes for m in ms]), np.array([m.time_s for m in ms]), settings.holdout_every)
        except FitError as exc:
            raise FitError(f"{key[0]} {key[1]} ({_size_range(ms)}): {exc}; {_FIT_ADVICE}") from None
        for i, held in zip(idx, f.held_out):
            measurements[i] = replace(measurements[i], held_out=held)
        pieces[key] = f
        return f

    compute: dict[str, ComputeRate] = {}
    for bench, label in list(series):
        if bench == "gemm":
            ms = [measurements[i] for i in series[(bench, label)]]
            n0 = compute_bound_from(ms)
            f = fit((bench, label), lambda m: m.flops, n0)
            compute[label] = ComputeRate(peak_flop_per_s=1.0 / f.beta, overhead_s=f.alpha)
            model = GEMM_MODEL + (f" (n >= {n0}; smaller products: launch-bound)" if n0 > min(m.size for m in ms) else "")
            records.append(_record(f"gemm {label}", model, {"overhead_s": f.alpha, "peak_flop_per_s": 1.0 / f.beta}, f))
        elif bench == "copy":
            records.append(_piece_record(bench, fit_regimes((bench, label))))
        elif bench in ("scale_add", "reduction"):  # records only: a series too flat to fit is noted, not fatal
            lo = settings.stream_fit_min_bytes
            try:
                f = fit((bench, label), lambda m: m.bytes, lo)
            except FitError as exc:
                notes.append(f"not fitted, a record only: {exc}")
                continue
            records.append(_record(bench, AB_MODEL + (f" (arrays >= {lo} B)" if lo else ""), _ab_coefficients(f), f))
        elif bench in ("h2d", "d2h", "d2d"):
            records.append(_piece_record(f"link {bench} {label}", fit_regimes((bench, label))))
        elif bench == "allreduce":
            p = _participants(label)
            f = fit((bench, label), partial(_ring_bytes, p))
            records.append(
                _record(
                    f"allreduce {label}",
                    RING_MODEL,
                    {"alpha_s": f.alpha / (2 * (p - 1)), "beta_s_per_byte": f.beta, "bandwidth_bytes_per_s": 1.0 / f.beta},
                    f,
                )
            )
    return measurements, fits, pieces, compute, records, notes


def _piece_record(name: str, f: PiecewiseFit) -> FitRecord:
    """The fit record of a piecewise (size regime) fit."""
    return FitRecord(
        name=name,
        model=PIECEWISE_MODEL + f" ({len(f.starts)} regime{'s' if len(f.starts) > 1 else ''})",
        coefficients=_regime_coefficients(f),
        r2=f.r2,
        max_rel_residual=f.max_rel_residual,
        n_points=f.n_points,
        n_holdout=f.n_holdout,
        holdout_median_rel_error=f.holdout_median_rel_error,
        holdout_max_rel_error=f.holdout_max_rel_error,
    )


def measurements_of(profile: DeviceProfile, benchmark: str, label: str | None = None) -> list[Measurement]:
    """The raw measurements of one series, sorted by size."""
    ms = [m for m in profile.measurements if m.benchmark == benchmark and (label is None or m.label == label)]
    return sorted(ms, key=lambda m: m.size)
