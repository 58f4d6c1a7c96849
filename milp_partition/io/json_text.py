"""Reading text files and JSON, and the checked field readers that every format of :mod:`milp_partition.io` shares.

Every error is an :class:`~milp_partition.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import difflib
import json
import math
import numbers
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic


class _Required:
    """Marker for a field without a default."""


REQUIRED = _Required()


# ---------------------------------------------------------------------------
# Reading files and parsing JSON (shared by every reader)
# ---------------------------------------------------------------------------


def read_text_file(path: str | Path) -> str:
    """Read a whole file as UTF-8 text.

    Parameters
    ----------
    path
        The file to read.

    Returns
    -------
    str
        Its text (a leading byte-order mark is dropped).

    Raises
    ------
    InputError
        When the file is missing, is a directory, cannot be read or is not UTF-8.
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("no such file; check the path", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file; give the path of a file inside it", source=source) from None
    except PermissionError:
        raise InputError("permission denied; make the file readable", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror or exc})", source=source) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        bad = data[exc.start : exc.start + 1]
        raise InputError(
            f"is not UTF-8 text (byte {bad!r} at offset {exc.start}, line {line}); save the file as UTF-8",
            source=source,
        ) from None


def parse_json(text: str, source: str = "") -> Any:
    """Parse JSON text, turning every failure into an :class:`InputError`.

    Parameters
    ----------
    text
        The JSON text.
    source
        The file it came from, for messages.

    Returns
    -------
    Any
        The parsed value.  ``NaN`` and ``Infinity`` literals come back as floats;
        the field readers reject them with the node and field named.

    Raises
    ------
    InputError
        On empty text or invalid JSON (with line and column).
    """
    if not text.strip():
        raise InputError("the file is empty; it should hold a JSON object", source=source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        hint = "the file looks truncated; complete it" if truncated else "fix the JSON syntax there"
        raise InputError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; {hint}", source=source) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"invalid JSON: {exc}", source=source) from None


def dump_json_lines(data: Mapping[str, Any], list_keys: Iterable[str] = ("nodes", "edges", "links"), *, source: str = "") -> str:
    """Serialize an object as JSON with one list element per line under ``list_keys``.

    Floats are written with ``repr`` precision (plain :func:`json.dumps`), so they read back equal.

    Raises
    ------
    InputError
        When a value is NaN or infinite (JSON has no such numbers).
    """
    keys = set(list_keys)
    items = list(data.items())
    lines = ["{"]
    try:
        for i, (key, value) in enumerate(items):
            comma = "," if i < len(items) - 1 else ""
            if key in keys and isinstance(value, list) and value:
                lines.append(f"  {json.dumps(key)}: [")
                lines.extend(
                    f"    {json.dumps(el, allow_nan=False)}{',' if j < len(value) - 1 else ''}" for j, el in enumerate(value)
                )
                lines.append(f"  ]{comma}")
            else:
                lines.append(f"  {json.dumps(key)}: {json.dumps(value, allow_nan=False)}{comma}")
    except ValueError as exc:
        raise InputError(f"cannot write a NaN or infinite number as JSON ({exc})", source=source) from None
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_text_file(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, atomically and only over a regular file (:mod:`milp_partition.io.atomic`),
    turning OS errors into :class:`InputError`."""
    write_atomic(path, text, what="the output")


# ---------------------------------------------------------------------------
# Checked field readers
# ---------------------------------------------------------------------------


#: Largest magnitude of a number field (times, rates, costs): beyond it sums and scaled models overflow.
MAX_NUMBER = 1e18
#: Smallest magnitude of a nonzero number field: below it ratios overflow (0 itself is fine).
MIN_NONZERO = 1e-30
#: Largest byte count a field may hold (1 PiB): sums of thousands of them stay within 64-bit integers.
MAX_BYTES = 2**50


def _field(where: str, key: str) -> str:
    return f"{where} field '{key}'"


def get_value(obj: Mapping[str, Any], key: str, where: str, source: str, default: Any = REQUIRED) -> Any:
    """``obj[key]``, or ``default``; a missing required field raises :class:`InputError`."""
    if key in obj:
        return obj[key]
    if default is REQUIRED:
        raise InputError(f"missing required field {key!r}", source=source, where=where)
    return default


def check_object(value: Any, where: str, source: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object (a mapping with string keys), else :class:`InputError`."""
    if not isinstance(value, Mapping):
        raise InputError(f"must be a JSON object, got {_short(value)}", source=source, where=where)
    return value


def check_list(value: Any, where: str, source: str) -> list[Any]:
    """``value`` if it is a JSON array (list or tuple), else :class:`InputError`."""
    if not isinstance(value, (list, tuple)):
        raise InputError(f"must be a JSON array, got {_short(value)}", source=source, where=where)
    return list(value)


def check_known_keys(obj: Mapping[str, Any], known: Iterable[str], where: str, source: str) -> None:
    """Reject keys of ``obj`` outside ``known``, suggesting the closest known one."""
    known = tuple(known)
    for key in obj:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(known)}"
            raise InputError(f"unknown field {key!r}; {hint}", source=source, where=where)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def get_float(obj: Mapping[str, Any], key: str, where: str, source: str, default: Any = REQUIRED) -> float:
    """A finite number field as ``float``.

    Negative values pass; :func:`~milp_partition.graph.make_graph` rejects them with the same naming.
    """
    return to_float(get_value(obj, key, where, source, default), _field(where, key), source)


def get_optional_float(obj: Mapping[str, Any], key: str, where: str, source: str) -> float | None:
    """A finite number or null field (missing means null)."""
    return to_number(obj.get(key), _field(where, key), source, allow_none=True)


def to_number(value: Any, where: str, source: str, *, allow_none: bool = False) -> float | None:
    """Check that ``value`` is a finite number (or ``None`` with ``allow_none``) and return it as ``float``."""
    if value is None and allow_none:
        return None
    return to_float(value, where, source, expected="a number or null" if allow_none else "a number")


def to_float(value: Any, where: str, source: str, *, expected: str = "a number") -> float:
    """Check that ``value`` is a finite number and return it as ``float``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"must be {expected}, got {_short(value)}", source=source, where=where)
    try:
        result = float(value)
    except OverflowError:
        raise InputError(f"is too large, got {_short(value)}", source=source, where=where) from None
    if not math.isfinite(result):
        raise InputError(f"must be a finite number, got {value!r}; replace it with a measured value", source=source, where=where)
    if abs(result) > MAX_NUMBER:
        raise InputError(f"is too large ({_short(value)}; at most {MAX_NUMBER:g}): check its unit", source=source, where=where)
    if result != 0 and abs(result) < MIN_NONZERO:
        raise InputError(
            f"is too small ({_short(value)}; nonzero values must be at least {MIN_NONZERO:g}): use 0 or check its unit",
            source=source,
            where=where,
        )
    return result


def get_bytes(obj: Mapping[str, Any], key: str, where: str, source: str, default: Any = REQUIRED) -> int:
    """A whole number of bytes as ``int`` (an integral float such as ``1024.0`` is accepted)."""
    return to_bytes(get_value(obj, key, where, source, default), _field(where, key), source)


def get_optional_bytes(obj: Mapping[str, Any], key: str, where: str, source: str) -> int | None:
    """A whole number of bytes or null (missing means null)."""
    value = obj.get(key)
    return None if value is None else to_bytes(value, _field(where, key), source, expected="a number or null")


def to_bytes(value: Any, where: str, source: str, *, expected: str = "a number") -> int:
    """Check that ``value`` is a whole number and return it as ``int``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        number = int(value)
    else:
        real = to_float(value, where, source, expected=expected)
        if not real.is_integer():
            raise InputError(f"must be a whole number of bytes, got {value!r}", source=source, where=where)
        number = int(real)
    if abs(number) > MAX_BYTES:
        raise InputError(f"is too large for a byte count ({_short(value)}; at most 2**50 = 1 PiB)", source=source, where=where)
    return number


def get_str(obj: Mapping[str, Any], key: str, where: str, source: str, default: Any = REQUIRED) -> str:
    """A string field."""
    value = get_value(obj, key, where, source, default)
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {_short(value)}", source=source, where=_field(where, key))
    return value


def get_optional_str(obj: Mapping[str, Any], key: str, where: str, source: str) -> str | None:
    """A string or null field (missing means null)."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"must be a string or null, got {_short(value)}", source=source, where=_field(where, key))
    return value


def get_bool(obj: Mapping[str, Any], key: str, where: str, source: str, default: Any = REQUIRED) -> bool:
    """A ``true``/``false`` field."""
    value = get_value(obj, key, where, source, default)
    if not isinstance(value, bool):
        raise InputError(f"must be true or false, got {_short(value)}", source=source, where=_field(where, key))
    return value


def to_id(value: Any, where: str, source: str) -> str:
    """A node id: a non-empty string, or an integer kept as its decimal text."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InputError(f"must be a non-empty string or an integer, got {_short(value)}", source=source, where=where)


def read_setting_file(path: str | Path, fmt: str, label: str, keys: Iterable[str]) -> dict[str, Any]:
    """A ``gap`` setting file: a JSON object whose ``format`` is ``fmt`` and whose keys are among ``keys``.

    :class:`InputError` naming the file: unreadable or not JSON, another format (``label`` names the problem's files,
    e.g. ``"Galvatron"``), an unknown key (with the closest known one).
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a readable JSON setting file: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise InputError(f"not a {label} setting file (format {fmt})", source=str(path))
    check_known_keys(data, keys, "setting", str(path))
    return data


def recognize_setting_file(path: str | Path, fmt: str, label: str, keys: Iterable[str]) -> str | None:
    """``None`` for a setting file of :func:`read_setting_file`'s kind, else why it is not one."""
    if Path(path).is_dir():
        return f"a folder (give a {label} setting file, format {fmt})"
    try:
        read_setting_file(path, fmt, label, keys)
    except InputError as exc:
        return str(exc)
    return None
