"""Timing rounds spread over time: the micro-batch sizes interleaved round by round, for at least a number of seconds.

On this project's CPU machine the same one-thread work runs at one of two speeds about 2x apart, in spells of 1-3 s
(results/cpu_regimes.md, docs/import.md: the fourth diagnosis).  A calibration that times one size's passes back to back
within a fraction of a second times them at the speed of that moment, and another size at another's: the planner then
compares sizes (and shapes) measured at different speeds, and a plan's launch later runs at a third.  So the layer
timers take their rounds in turn over every size (:func:`interleaved_rounds`: round ``r`` gives each size one pass),
for at least ``rounds`` rounds and at least ``min_seconds`` seconds; each size's median then comes from passes spread
over the whole window, every size's from the same seconds.  ``run --seconds`` spreads a launch's timed steps likewise
(:func:`steps_for_seconds`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: Rounds at most, whatever ``min_seconds`` asks (a pass of a few microseconds would otherwise ask for millions).
MOST_ROUNDS = 400


def rounds_for(rounds: int, min_seconds: float, first_round_s: float, most: int = MOST_ROUNDS) -> int:
    """The rounds to run: at least ``rounds``, enough rounds of ``first_round_s`` to last ``min_seconds``, at most
    ``most`` (never fewer than ``rounds``).

    Examples
    --------
    >>> rounds_for(7, 0.0, 0.5)
    7
    >>> rounds_for(7, 10.0, 0.5)
    20
    >>> rounds_for(7, 10.0, 0.0)
    400
    """
    if rounds < 1:
        raise ValueError(f"rounds must be positive, got {rounds}")
    if not min_seconds > 0:
        return rounds
    if not first_round_s > 0:
        return max(rounds, most)
    return max(rounds, min(most, math.ceil(min_seconds / first_round_s)))


def interleaved_rounds(
    items: Sequence[T],
    one_pass: Callable[[T, bool], None],
    rounds: int,
    min_seconds: float = 0.0,
    agree_max: Callable[[float], float] | None = None,
    most: int = MOST_ROUNDS,
) -> int:
    """A warm-up round, then rounds of ``one_pass(item, record)`` over ``items`` in order; returns the recorded rounds.

    The first recorded round is timed: its seconds (with several ranks, the largest over them, by ``agree_max``, a
    collective every rank calls once) set the count, :func:`rounds_for`, so that every rank runs the same rounds (their
    passes meet at barriers).  ``record`` is ``False`` in the warm-up round only.
    """
    for item in items:
        one_pass(item, False)
    t0 = time.perf_counter()
    for item in items:
        one_pass(item, True)
    first = time.perf_counter() - t0
    if agree_max is not None:
        first = agree_max(first)
    total = rounds_for(rounds, min_seconds, first, most)
    for _ in range(total - 1):
        for item in items:
            one_pass(item, True)
    return total


def steps_for_seconds(
    steps: int, warmup: int, step_estimate_s: float, seconds: float, warmup_seconds: float, most: int
) -> tuple[int, int]:
    """``(steps, warm-up steps)`` of a run asked for at least ``seconds`` of timed steps after at least ``warmup_seconds``
    of warm-up, judged by ``step_estimate_s`` (the plan's planned step), and at least ``steps`` and ``warmup`` steps;
    at most ``most`` steps in all (the warm-up first cut to leave one timed step).  An estimate that is not a positive
    number asks for nothing more.

    Examples
    --------
    >>> steps_for_seconds(12, 1, 0.01, 0.0, 0.0, 10_000)
    (12, 1)
    >>> steps_for_seconds(12, 1, 0.01, 4.0, 2.0, 10_000)
    (600, 200)
    >>> steps_for_seconds(12, 1, 1.0, 4.0, 2.0, 10_000)
    (13, 2)
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be positive and warm-up not negative, got {steps} and {warmup}")
    warm, timed = warmup, max(steps - warmup, 1)
    if step_estimate_s > 0 and math.isfinite(step_estimate_s):
        if warmup_seconds > 0:
            warm = max(warm, math.ceil(warmup_seconds / step_estimate_s))
        if seconds > 0:
            timed = max(timed, math.ceil(seconds / step_estimate_s))
    if warm + timed > most:
        warm = min(warm, most - 1)
        timed = most - warm
    return warm + timed, warm


#: The bytes every size's models may hold at once for the sizes to be interleaved (:func:`size_groups`); above it each
#: size is timed alone, its models released before the next size's are built.
INTERLEAVED_BYTES = 2 << 30


@dataclass(frozen=True)
class SizeGroup:
    """Sizes timed together: ``sizes`` interleaved round by round for at least ``seconds``."""

    sizes: tuple[int, ...]
    seconds: float


def size_groups(
    sizes: Sequence[int], per_size_bytes: float, min_seconds: float, most_bytes: float = INTERLEAVED_BYTES
) -> list[SizeGroup]:
    """Every size in one group, for ``min_seconds``, when their models (``per_size_bytes`` each) hold at most
    ``most_bytes`` together; otherwise one group per size, each for its share ``min_seconds / len(sizes)``.

    Examples
    --------
    >>> size_groups([1, 2, 4], 1e6, 6.0)
    [SizeGroup(sizes=(1, 2, 4), seconds=6.0)]
    >>> size_groups([1, 2], 2e9, 6.0)
    [SizeGroup(sizes=(1,), seconds=3.0), SizeGroup(sizes=(2,), seconds=3.0)]
    """
    order = tuple(sorted(set(sizes)))
    if not order:
        return []
    if per_size_bytes * len(order) <= most_bytes:
        return [SizeGroup(order, min_seconds)]
    return [SizeGroup((b,), min_seconds / len(order)) for b in order]


def model_bytes(data: dict[str, Any]) -> float:
    """One copy of an imported model with its gradients and optimizer state, from the graph (``param_bytes`` of its
    nodes, ``layers.optimizer_state_bytes_per_param_byte``): what a layer timer's model holds."""
    params = math.fsum(float(n.get("param_bytes") or 0.0) for n in data.get("nodes", []) if isinstance(n, dict))
    layers = data.get("layers") if isinstance(data.get("layers"), dict) else {}
    factor = float((layers or {}).get("optimizer_state_bytes_per_param_byte") or 0.0)
    return params * (2.0 + factor)
