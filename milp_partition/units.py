"""Parsing of human-written sizes and rates on the command line (``16GiB``, ``12.5GB/s``, ``200Gb/s``).

A unit is always required: ``40`` could be bytes or GiB, so it is refused with a message naming the units.
``B`` is a byte and ``b`` a bit (rates only); prefixes are decimal (k, M, G, T, P) or binary (Ki, Mi, Gi, Ti, Pi).
"""

from __future__ import annotations

import math
import re

from milp_partition.errors import InputError

#: Multipliers of the prefixes (case-insensitive): decimal (k, M, G, T, P) and binary (Ki, Mi, Gi, Ti, Pi).
_PREFIXES = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "p": 10**15,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
    "pi": 2**50,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _bytes_per_unit(unit: str, text: str, what: str, *, rate: bool) -> float:
    """Bytes in one ``unit``: ``B`` is a byte and ``b`` a bit (``Gb/s`` = 1e9 / 8 bytes per second); a unit is required."""
    example = "25GB/s, 25GiB/s or 200Gb/s (bits)" if rate else "16GiB, 16GB or 4096B"
    if not unit:
        plain = "bytes per second" if rate else "bytes"
        raise InputError(f"{text!r} has no unit (it would be {plain}): write it with one, e.g. {example}", where=what)
    prefix, last = unit[:-1].lower(), unit[-1]
    if last not in "Bb" or prefix not in _PREFIXES:
        raise InputError(f"cannot read the unit of {text!r}; write e.g. {example}", where=what)
    if last == "b" and not rate:
        raise InputError(f"{text!r} is in bits ('b'); a size is in bytes: write 'B', e.g. {example}", where=what)
    return _PREFIXES[prefix] / (8.0 if last == "b" else 1.0)


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
    """``"16GiB"`` -> 17179869184; a unit is required (``B``: bytes; ``4096B``).  Raises :class:`InputError` (also on
    NaN, infinity, bits and sizes over :data:`MAX_BYTES`)."""
    m = _PATTERN.match(text)
    if not m:
        raise InputError(f"cannot read {text!r} as a size; write e.g. 16GiB, 16GB or 4096B", where=what)
    value = float(m.group(1)) * _bytes_per_unit(m.group(2), text, what, rate=False)
    if not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite size", where=what)
    if value > MAX_BYTES:
        raise InputError(f"{text!r} is more than 1PiB: check its unit", where=what)
    return math.floor(value)


def parse_rate(text: str, what: str) -> float:
    """``"12.5GB/s"`` -> 1.25e10 bytes per second, ``"200Gb/s"`` -> 2.5e10 (``b``: bits); a unit is required.  Raises
    :class:`InputError` on anything but a finite rate more than 0 and at most :data:`MAX_RATE_BYTES_PER_S` (``nan``,
    ``inf`` and ``-5`` included)."""
    body = text.strip()
    per_second = True
    if body.lower().endswith("/s"):
        body = body[:-2]
    elif body.endswith("ps"):  # 100Gbps, 25GBps
        body = body[:-2]
    else:
        per_second = False
    m = _PATTERN.match(body)
    if not m:
        raise InputError(f"cannot read {text!r} as a rate; write e.g. 25GB/s, 25GiB/s or 200Gb/s (bits)", where=what)
    if not per_second and m.group(2):  # 25GiB: a size, not a rate
        raise InputError(f"{text!r} is a size, not a rate; write it per second, e.g. {body}/s", where=what)
    value = float(m.group(1)) * _bytes_per_unit(m.group(2), text, what, rate=True)
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{text!r} is not a finite rate more than 0", where=what)
    if value > MAX_RATE_BYTES_PER_S:
        raise InputError(f"{text!r} is more than 1PiB/s: check its unit", where=what)
    return value


def format_rate(bytes_per_s: float) -> str:
    """A rate for reports: ``25 GiB/s`` (binary units, as sizes are printed)."""
    for unit, scale in (("TiB/s", 2**40), ("GiB/s", 2**30), ("MiB/s", 2**20), ("KiB/s", 2**10)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.4g} {unit}"
    return f"{bytes_per_s:.4g} B/s"
