"""Options shared by the problems of ``solve | evaluate | info``; a problem's own options live in its module.

Problem options default to ``None`` (``False`` for switches), so the dispatcher can
tell which were given and refuse those the problem at hand does not take; each
problem module applies its own defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

from milp_partition.backends.registry import BACKENDS, NO_SOLVER, model_solvers, solver_choices
from milp_partition.cli import flags
from milp_partition.errors import InputError
from milp_partition.registry import DEFAULT_PROGRESS_S, DEFAULT_SEED, DEFAULT_THREADS, DEFAULT_TIME_LIMIT_S
from milp_partition.units import parse_bytes

_Size = TypeVar("_Size", int, float)

#: Defaults applied by the problem modules (the parser's defaults are None so that "given" can be told).
DEFAULT_MEMORY_MODEL = "static"

#: Options every problem of ``solve``/``evaluate`` takes (the rest are checked per problem; the flags of the common
#: settings, :data:`~milp_partition.registry.COMMON_FLAGS`, per problem too, by
#: :meth:`~milp_partition.registry.ProblemEntry.common_settings`).
COMMON = frozenset({"command", "instance", "solution", "problem", "handler", "output", "quiet", "no_heuristics"})


def flag_name(dest: str) -> str:
    """``max_time_per_sample`` -> ``--max-time-per-sample``."""
    return "--" + dest.replace("_", "-")


def add_problem_options(p: argparse.ArgumentParser, problems: tuple[str, ...]) -> None:
    """The options more than one problem reads: problem choice, memory model, profile, cluster."""
    g = p.add_argument_group("problem")
    g.add_argument(
        "--problem",
        choices=list(problems),
        help="which problem to solve (default: placement for a placement-instance file, strategy for a strategy-tables "
        "or strategy-layers file, else pipeline)",
    )
    g.add_argument(
        "--memory-model",
        choices=["static", "1f1b", "liveness"],
        help="static (default): sum of bytes on a device; 1f1b (pipeline; the default for a training graph with backward "
        "nodes and saved activations): training pipeline, stage i of s keeps s-i micro-batches of activations; liveness "
        "(strategy, placement): an activation counts only while it is live",
    )
    g.add_argument(
        "--optimizer-factor",
        type=flags.factor,
        help="multiplier on parameter bytes (optimizer state): pipeline 1f1b default 1, strategy default 3",
    )
    g.add_argument(
        "--profile",
        help="device profile for costs derived from FLOPs and bytes: a datasheet name (V100, A100, H100, H200) or a profile "
        "JSON file (strategy-layers files default to H100; pipeline: nodes without measured times get times from their FLOPs)",
    )
    c = p.add_argument_group("cluster (overrides the instance's own; one name per concept for every problem)")
    c.add_argument("--cluster", type=Path, help="a cluster JSON file (format milp-partition-cluster/1)")
    c.add_argument("--devices", type=flags.devices, help="number of identical accelerators (strategy-layers: p, a power of two)")
    c.add_argument(
        "--memory",
        "--memory-limit",
        dest="memory",
        type=flags.byte_size,
        help="memory per accelerator, e.g. 16GiB (strategy: the per-device limit on the chosen configurations; "
        "--memory-limit is its old name)",
    )
    c.add_argument(
        "--memory-reserve",
        type=flags.byte_size,
        help="memory per accelerator kept free of the plan (framework, allocator, CUDA context), e.g. 2GiB: the plan "
        "fits --memory minus it (pipeline, strategy, joint)",
    )
    c.add_argument("--cpu-cores", type=flags.cpu_cores, help="host CPU cores usable as devices")
    c.add_argument("--link-latency", type=flags.nonnegative_seconds, help="link latency in seconds")
    c.add_argument(
        "--bandwidth",
        "--link-bandwidth",
        dest="bandwidth",
        type=flags.rate,
        help="link bandwidth, e.g. 12GB/s or 100Gb/s (joint: from each device to the outside; default the file's; "
        "--link-bandwidth is its old name)",
    )


def add_solver_options(p: argparse.ArgumentParser) -> None:
    """The options of the solve chain every problem runs."""
    o = p.add_argument_group("solver")
    # (no parser defaults: the registry's common_settings applies them, so that a flag a problem does not use can be told and refused)
    o.add_argument(
        "--solver",
        choices=solver_choices(),
        help=f"back-end ({', '.join(f'{e.name}: {e.summary}' for e in BACKENDS if e.name in model_solvers())}); "
        f"{NO_SOLVER} = heuristics, DPs and bounds only (default {model_solvers()[0]}; galvatron: {NO_SOLVER}, its exact search proves)",
    )
    o.add_argument(
        "--time-limit",
        type=flags.positive_seconds,
        help=f"time limit in seconds for the whole solve (default {DEFAULT_TIME_LIMIT_S:g})",
    )
    o.add_argument(
        "--threads",
        type=flags.threads,
        help=f"solver threads (default {DEFAULT_THREADS}; joint: with 2 or more, its bounds run beside its heuristics)",
    )
    o.add_argument("--seed", type=flags.seed, help=f"the back-end's random seed, 0 to 2^31-1 (default {DEFAULT_SEED})")
    o.add_argument("--no-warm-start", action="store_true", help="do not hint the heuristic solution or bound by its value")
    o.add_argument("--no-heuristics", action="store_true", help="skip the heuristics")
    o.add_argument(
        "--progress",
        type=flags.nonnegative_seconds,
        help=f"seconds between progress lines on stderr (default {DEFAULT_PROGRESS_S:g}; 0 = off)",
    )
    o.add_argument("--output", "-o", type=Path, help="write the result JSON here (checked before solving)")
    o.add_argument("--quiet", "-q", action="store_true", help="print only the summary line")


def reserved(memory_bytes: _Size | None, args: argparse.Namespace) -> _Size | None:
    """``memory_bytes`` less ``--memory-reserve`` (``None`` stays ``None``: no limit); a reserve that leaves nothing is
    bad input."""
    reserve = getattr(args, "memory_reserve", None)
    if reserve is None or memory_bytes is None:
        return memory_bytes
    r = parse_bytes(str(reserve), "--memory-reserve")
    if r >= memory_bytes:
        raise InputError(
            f"{reserve} is not less than the memory per accelerator ({memory_bytes:.0f} bytes): nothing would be left",
            where="--memory-reserve",
        )
    return memory_bytes - r
