"""Parsing of human-written sizes and rates on the command line (``16GiB``, ``12.5GB/s``)."""

from __future__ import annotations

import math
import re

from milp_partition.errors import InputError

_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str, what: str) -> int:
    """``"16GiB"`` -> 17179869184; plain numbers are bytes.  Raises :class:`InputError`."""
    m = _PATTERN.match(text)
    if not m or m.group(2).lower() not in _BYTE_UNITS:
        raise InputError(f"cannot read {text!r} as a size; write e.g. 16GiB, 12GB or 1000000", where=what)
    value = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite size", where=what)
    return math.floor(value)


def parse_rate(text: str, what: str) -> float:
    """``"12.5GB/s"`` -> 1.25e10 bytes per second."""
    body = text[:-2] if text.lower().endswith("/s") else text
    return float(parse_bytes(body, what)) if not _is_plain(body) else float(body)


def _is_plain(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
