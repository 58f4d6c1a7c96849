"""Checked numeric command-line flags and a parser whose usage errors are one line.

Every numeric flag goes through one of the ``argparse`` types here, so a bad value
(``--time-limit -5``, ``--threads 100000``, ``--seed 2**70``, ``--memory 0``) stops
the command with exit 2 and one line naming the flag, before anything is read or
solved.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from milp_partition.cli.exit_codes import EXIT_INPUT
from milp_partition.errors import InputError
from milp_partition.units import MAX_BYTES, MAX_COUNT, MAX_DEVICES, MAX_FACTOR, parse_bytes, parse_rate

#: Largest solver thread count accepted (CP-SAT and CBC take a 32-bit count; more than this is a typo).
MAX_THREADS = 1024
#: Largest random seed accepted (CP-SAT's ``random_seed`` is a signed 32-bit integer).
MAX_SEED = 2**31 - 1
#: Largest time limit accepted, in seconds (a year; larger values overflow some back-ends' timers).
MAX_TIME_LIMIT_S = 365 * 24 * 3600.0


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit 2."""

    def error(self, message: str) -> NoReturn:
        hint = next(
            (h for flag, h in NAMED_ELSEWHERE.items() if message.startswith("unrecognized") and flag in message.split()), ""
        )
        print(f"{self.prog}: error: {message}{hint} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_INPUT)


#: One idea under two names in two commands: a flag given to the command that names it otherwise gets the name
#: that applies (issue 43 item 15).
NAMED_ELSEWHERE = {
    "--optimizer-state-factor": "; solve and evaluate name it --optimizer-factor (import names it --optimizer-state-factor)",
    "--optimizer-factor": "; import names it --optimizer-state-factor (solve and evaluate name it --optimizer-factor)",
}
#: A problem option refused for a problem that takes the same idea under another flag: dest -> problem -> that flag.
SAME_IDEA = {
    "global_batch": {"joint": "--microbatches (one-sample micro-batches per batch)"},
    "microbatches": {"galvatron": "--global-batch"},
}


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{what} must be a finite number, got {text!r}")
    return value


def _integer(text: str, what: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}") from None


def positive_seconds(text: str) -> float:
    """A time limit: a finite number of seconds, more than 0 and at most a year."""
    value = _number(text, "a time in seconds")
    if not 0 < value <= MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most {MAX_TIME_LIMIT_S:g} seconds, got {text}")
    return value


def nonnegative_seconds(text: str) -> float:
    """An interval or latency in seconds: finite, 0 or more."""
    value = _number(text, "a time in seconds")
    if not 0 <= value <= MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"must be 0 or more (and at most {MAX_TIME_LIMIT_S:g}), got {text}")
    return value


def positive_number(text: str) -> float:
    """A finite number more than 0 (e.g. a bound on time per sample)."""
    value = _number(text, "the value")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def ranged_int(low: int, high: int) -> Callable[[str], int]:
    """An ``argparse`` type: a whole number in ``[low, high]``."""

    def parse(text: str) -> int:
        value = _integer(text, "the value")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, got {text}")
        return value

    parse.__name__ = f"int in [{low}, {high}]"
    return parse


threads = ranged_int(1, MAX_THREADS)
seed = ranged_int(0, MAX_SEED)
devices = ranged_int(1, MAX_DEVICES)
cpu_cores = ranged_int(0, MAX_DEVICES)
count = ranged_int(1, MAX_COUNT)


def byte_size(text: str) -> str:
    """A memory size such as ``16GiB`` (kept as text; checked here: more than 0 bytes)."""
    try:
        value = parse_bytes(text, "the size")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value <= MAX_BYTES:
        raise argparse.ArgumentTypeError(f"must be more than 0 bytes and at most 1PiB, got {text}")
    return text


def rate(text: str) -> str:
    """A bandwidth such as ``12GB/s`` (kept as text; checked here: finite and more than 0)."""
    try:
        value = parse_rate(text, "the bandwidth")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite rate more than 0, got {text}")
    return text


def factor(text: str) -> float:
    """A multiplier such as the optimizer-state factor: finite, 0 or more, at most 1000."""
    value = _number(text, "the factor")
    if not 0 <= value <= MAX_FACTOR:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_FACTOR:g}, got {text}")
    return value


def fraction_below_one(text: str) -> float:
    """A relative gap such as ``--stop-gap``: finite, 0 or more and below 1."""
    value = _number(text, "the fraction")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be 0 or more and below 1 (0.01 is 1 %), got {text}")
    return value


bytes_per_element = ranged_int(1, 64)
