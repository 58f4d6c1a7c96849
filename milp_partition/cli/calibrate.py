"""``milp-partition calibrate``: run the microbenchmark suite and write a measured device profile.

Registered by :mod:`milp_partition.cli.dispatch` through ``_COMMAND_MODULES``.  A progress bar goes to
stderr, a summary table of the fits to stdout.  Exit codes: 0 a profile was written; 2 bad
input or an unavailable back-end (one line, no traceback); 1 a kernel failed its check or a
fit could not be made.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from milp_partition.calibration.backend import select_backend
from milp_partition.calibration.build import build_profile
from milp_partition.calibration.fit import FitError
from milp_partition.calibration.gloo import apply_gloo, measure_gloo
from milp_partition.calibration.kernels import KernelCheckError
from milp_partition.calibration.profile import write_profile
from milp_partition.calibration.settings import preset
from milp_partition.calibration.suite import run_suite
from milp_partition.cli.output import check_writable
from milp_partition.errors import MilpPartitionError

if TYPE_CHECKING:
    from milp_partition.calibration.profile import DeviceProfile

EXIT_OK, EXIT_FAILED = 0, 1
#: Width of the progress bar in characters.
BAR_WIDTH = 30


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` command."""
    p = subparsers.add_parser(
        "calibrate",
        help="measure this machine with microbenchmarks and write a device profile",
        description="Run matrix-product, streaming, latency and copy microbenchmarks (CuPy on a GPU, NumPy on the CPU), "
        "fit the cost model and write a device profile JSON (format milp-partition-profile/1).",
    )
    p.add_argument(
        "--backend",
        choices=["auto", "cupy", "numpy"],
        default="auto",
        help="auto: cupy when it imports and sees a GPU, else numpy (default auto)",
    )
    p.add_argument("--quick", action="store_true", help="a smaller size grid (under a minute on a small CPU)")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests: the smallest grid
    p.add_argument(
        "--output", "-o", type=Path, default=Path("profile.json"), help="where to write the profile (default profile.json)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--no-gloo",
        action="store_true",
        help="numpy backend: do not fit gloo's all-reduce and send/recv between 2 processes (needs torch; skipped with --tiny)",
    )
    p.set_defaults(handler=run_calibrate)


class ProgressBar:
    """A one-line progress bar on a terminal, a line per benchmark series elsewhere."""

    def __init__(self, stream: TextIO, enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self.last_series = ""

    def __call__(self, done: int, total: int, title: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        if self.tty:
            filled = BAR_WIDTH * done // max(total, 1)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            end = "\n" if done == total else ""
            self.stream.write(f"\r[{bar}] {done:3d}/{total} {elapsed:5.1f} s  {title[:40]:40s}{end}")
        else:
            series = " ".join(title.split()[:2])
            if series != self.last_series or done == total:
                self.stream.write(f"[{done:3d}/{total}] {elapsed:5.1f} s  {series}\n")
                self.last_series = series
        self.stream.flush()


def _g(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"


def summary_table(profile: DeviceProfile) -> str:
    """The fits of a measured profile as a fixed-width table."""
    lines = [
        f"device     {profile.name}  (backend {profile.backend}, source {profile.source})",
        f"launch     {profile.launch_latency_s * 1e6:.3g} us (almost-empty kernel)",
        "",
        f"{'fit':24s} {'rate':>16s} {'alpha':>10s} {'R^2':>7s} {'max res':>8s} {'held-out med/max':>17s}",
    ]
    for f in profile.fits:
        c = f.coefficients
        if "peak_flop_per_s" in c:
            rate, alpha = f"{c['peak_flop_per_s'] / 1e9:.4g} GFLOP/s", c["overhead_s"]
        else:
            rate, alpha = f"{c['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s", c["alpha_s"]
        held = f"{_g(f.holdout_median_rel_error, 2)}/{_g(f.holdout_max_rel_error, 2)}" if f.n_holdout else "-"
        lines.append(
            f"{f.name:24s} {rate:>16s} {alpha * 1e6:8.3g}us {_g(f.r2, 4):>7s} {_g(f.max_rel_residual, 2):>8s} {held:>17s}"
        )
    lines += ["", *[f"note       {n}" for n in profile.notes]]
    return "\n".join(lines)


def run_calibrate(args: argparse.Namespace) -> int:
    """Handler of ``calibrate``."""

    check_writable(args.output)  # before minutes of measuring
    backend = select_backend(args.backend)
    if args.backend == "auto" and backend.name == "numpy":
        print(
            "milp-partition: note: no usable GPU (CuPy did not import or saw no device): measuring this CPU with NumPy; "
            f"{args.output} will be a CPU profile",
            file=sys.stderr,
        )
    settings = preset("tiny" if args.tiny else "quick" if args.quick else "full", backend.name)
    print(f"calibrating {backend.device_name} with the {backend.name} backend ({settings.preset} suite)", file=sys.stderr)
    bar = ProgressBar(sys.stderr, enabled=not args.no_progress)
    start = time.monotonic()
    try:
        result = run_suite(backend, settings, bar)
        profile = build_profile(backend, settings, result)
    except (KernelCheckError, FitError) as exc:
        print(f"milp-partition: calibration failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MilpPartitionError:
        raise
    if backend.name == "numpy" and not args.no_gloo and not args.tiny and importlib.util.find_spec("torch") is not None:
        print("calibrating gloo all-reduce and send/recv between 2 processes", file=sys.stderr)
        profile = apply_gloo(profile, measure_gloo())
    write_profile(profile, args.output)
    print(summary_table(profile))
    print(
        f"wrote      {args.output}  ({time.monotonic() - start:.1f} s in all: suite, fits"
        + (", gloo" if profile.notes and "gloo" in profile.notes[-1] else "")
        + f"; {result.seconds:.1f} s of it in the suite's timed benchmarks)"
    )
    return EXIT_OK
