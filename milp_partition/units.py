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


#: Largest size accepted anywhere (flags and files), in bytes: 1 PiB (sums of many stay within 64-bit byte counts).
MAX_BYTES = 2**50
#: Largest rate accepted anywhere, in bytes per second (1 PiB/s; no link is faster).
MAX_RATE_BYTES_PER_S = float(2**50)
#: Largest device count accepted anywhere (flags and files; the exact models are built per device).
MAX_DEVICES = 4096
#: Largest multiplier accepted (optimizer-state factor, backward ratios), on flags and in files.
MAX_FACTOR = 1000.0
#: Largest count accepted for other integers (micro-batches, ideal caps, repeats, depths).
MAX_COUNT = 10**9


def parse_bytes(text: str, what: str) -> int:
    """``"16GiB"`` -> 17179869184; plain numbers are bytes.  Raises :class:`InputError` (also on NaN, infinity
    and sizes over :data:`MAX_BYTES`)."""
    m = _PATTERN.match(text)
    if not m or m.group(2).lower() not in _BYTE_UNITS:
        raise InputError(f"cannot read {text!r} as a size; write e.g. 16GiB, 12GB or 1000000", where=what)
    value = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite size", where=what)
    if value > MAX_BYTES:
        raise InputError(f"{text!r} is more than 1PiB: check its unit", where=what)
    return math.floor(value)


def parse_rate(text: str, what: str) -> float:
    """``"12.5GB/s"`` -> 1.25e10 bytes per second.  Raises :class:`InputError` on anything but a finite rate
    more than 0 and at most :data:`MAX_RATE_BYTES_PER_S` (``nan``, ``inf`` and ``-5`` included)."""
    body = text.strip()
    body = body[:-2] if body.lower().endswith("/s") else body
    m = _PATTERN.match(body)
    if not m or m.group(2).lower() not in _BYTE_UNITS:
        raise InputError(f"cannot read {text!r} as a rate; write e.g. 25GiB/s or 12.5GB/s", where=what)
    value = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{text!r} is not a finite rate more than 0", where=what)
    if value > MAX_RATE_BYTES_PER_S:
        raise InputError(f"{text!r} is more than 1PiB/s: check its unit", where=what)
    return value
