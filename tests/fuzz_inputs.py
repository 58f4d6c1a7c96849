"""A seeded fuzzer over every input format the command line reads.

Each case takes a valid seed file, mutates it (a number made huge, tiny, negative or
non-finite; a value of the wrong type; a key dropped; a list emptied; a value nested
very deep; bytes that are not UTF-8; the text cut short) and runs the command line
in-process.  The contract: a clear one-line error with exit 2, or an answer (exit 0,
3 or 4); never a traceback and never exit 1 (an internal error).
"""

from __future__ import annotations

import copy
import io
import json
import random
import re
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milp_partition.cli.dispatch import main

#: Numbers a mutated numeric field takes.
NUMBERS: tuple[Any, ...] = (
    0, -1, -1e-300, 1e-300, 1e308, -1e308, 2**63, 2**64, 10**30, 1e30, 1e40, 10**400, 0.5, 3,
)  # fmt: skip
#: Values of the wrong type.
WRONG_TYPES: tuple[Any, ...] = (None, True, "x", "", "1e999", [], {}, [1, 2], {"a": 1}, "\u0000")
#: Depth of a deeply nested value.
DEEP = 200_000
_DEEP_MARK = "__milp_partition_fuzz_deep__"


@dataclass(frozen=True)
class Case:
    """One fuzz case: the mutated file's text (or bytes) and what was done to it."""

    data: bytes
    what: str


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):  # the first elements stand for the rest
            out.extend(_paths(v, (*prefix, i)))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


def _dumps(obj: Any) -> bytes:
    text = json.dumps(obj)
    deep = "[" * DEEP + "]" * DEEP
    return text.replace(json.dumps(_DEEP_MARK), deep).encode()


def mutate_json(data: Any, rng: random.Random) -> Case:
    """One mutation of parsed JSON ``data`` (not changed)."""
    obj = copy.deepcopy(data)
    paths = _paths(obj)
    path = rng.choice(paths)
    value = _get(obj, path)
    kind = rng.choice(["number", "number", "type", "drop", "empty", "deep", "dup"])
    if kind == "number" or (kind == "type" and isinstance(value, (int, float)) and rng.random() < 0.3):
        numeric = [p for p in paths if isinstance(_get(obj, p), (int, float)) and not isinstance(_get(obj, p), bool)]
        if numeric:
            path = rng.choice(numeric)
        new = rng.choice(NUMBERS)
        return Case(_dumps(_set(obj, path, new)), f"{path}: number -> {new!r}")
    if kind == "type":
        new = rng.choice(WRONG_TYPES)
        return Case(_dumps(_set(obj, path, new)), f"{path}: -> {new!r}")
    if kind == "drop" and path:
        parent = _get(obj, path[:-1])
        del parent[path[-1]]
        return Case(_dumps(obj), f"{path}: dropped")
    if kind == "empty":
        lists = [p for p in paths if isinstance(_get(obj, p), (list, dict))]
        path = rng.choice(lists)
        new = [] if isinstance(_get(obj, path), list) else {}
        return Case(_dumps(_set(obj, path, new)), f"{path}: emptied")
    if kind == "dup":
        lists = [p for p in paths if isinstance(_get(obj, p), list) and _get(obj, p)]
        if lists:
            path = rng.choice(lists)
            items = _get(obj, path)
            items.append(copy.deepcopy(items[0]))
            return Case(_dumps(obj), f"{path}: first element duplicated")
    return Case(_dumps(_set(obj, path, _DEEP_MARK)), f"{path}: nested {DEEP} deep")


def mutate_bytes(raw: bytes, rng: random.Random) -> Case:
    """One byte-level mutation: bytes that are not UTF-8, the file cut short, or a line dropped/duplicated."""
    kind = rng.choice(["utf8", "cut", "line", "line", "number"])
    if kind == "utf8":
        at = rng.randrange(len(raw))
        return Case(raw[:at] + b"\xff\xfe\xc3" + raw[at:], f"invalid UTF-8 at {at}")
    if kind == "cut":
        at = rng.randrange(len(raw))
        return Case(raw[:at], f"cut at {at}")
    lines = raw.split(b"\n")
    i = rng.randrange(len(lines))
    if kind == "line":
        if rng.random() < 0.5:
            return Case(b"\n".join(lines[:i] + lines[i + 1 :]), f"line {i} dropped")
        return Case(b"\n".join(lines[: i + 1] + lines[i:]), f"line {i} duplicated")
    import re

    numbers = list(re.finditer(rb"\d+(\.\d+)?", raw))
    if not numbers:
        return Case(raw, "unchanged")
    m = rng.choice(numbers)
    new = str(rng.choice(NUMBERS)).encode()
    return Case(raw[: m.start()] + new + raw[m.end() :], f"number at {m.start()} -> {new!r}")


def mutations(seed_file: Path, count: int, seed: int) -> list[Case]:
    """``count`` mutated versions of ``seed_file`` (JSON files mutate as JSON four times in five)."""
    rng = random.Random(seed)
    raw = seed_file.read_bytes()
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    out = []
    for _ in range(count):
        if data is not None and rng.random() < 0.8:
            out.append(mutate_json(data, rng))
        else:
            out.append(mutate_bytes(raw, rng))
    return out


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run the command line in-process; return (exit code, stdout, stderr).  Exceptions propagate (a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse usage errors
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def check_contract(argv: list[str], what: str) -> tuple[int, str]:
    """Run ``argv``; raise AssertionError unless the answer keeps the contract (see the module docstring)."""
    rc, out, err = run_cli(argv)
    assert rc in (0, 2, 3, 4), f"{what}: exit {rc}; {err.strip()[-500:]} {out.strip()[-300:]}"
    for line in out.splitlines():  # no value that is not a finite number is ever reported (let alone as verified)
        if line.split()[:1] in (["objective"], ["[result]"]) or "(verified" in line:
            assert not re.search(r"\b(nan|inf|infinity|none|null)\b", line, re.IGNORECASE), f"{what}: {line!r}"
    if rc == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("milp-partition"), f"{what}: not one clear line: {err[:500]!r}"
        assert len(lines[0]) < 2000, f"{what}: error line too long ({len(lines[0])} chars)"
    return rc, err


Runner = Callable[[Path], list[str]]
