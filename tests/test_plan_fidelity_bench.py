"""The pure-Python parts of ``benchmarks/plan_fidelity.py``: the shapes it forces and the rank correlation. No run,
no timing."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "plan_fidelity.py"


@pytest.fixture(scope="module")
def pf() -> Any:
    spec = importlib.util.spec_from_file_location("plan_fidelity", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["plan_fidelity"] = module
    spec.loader.exec_module(module)
    return module


def test_shapes_are_every_product_that_fits(pf: Any) -> None:
    # (stages S, data-parallel D, micro-batches N): S D <= devices, N among the counts and dividing the global batch,
    # D dividing N, N / D >= S (1F1B needs a micro-batch per stage on each replica)
    assert sorted(pf.shapes(2, [1, 2, 4], 8)) == [(1, 1, 1), (1, 1, 2), (1, 1, 4), (1, 2, 2), (1, 2, 4), (2, 1, 2), (2, 1, 4)]
    got = pf.shapes(4, [1, 2, 3, 4, 8], 8)
    want = [
        (s, d, n)
        for n in (1, 2, 3, 4, 8)
        for s in range(1, 5)
        for d in range(1, 5)
        if s * d <= 4 and 8 % n == 0 and n % d == 0 and n // d >= s
    ]
    assert sorted(got) == sorted(want) and len(got) == len(set(got))
    assert not any(n == 3 for _s, _d, n in got)  # 3 does not divide the global batch


def test_spearman_against_the_definition_without_ties(pf: Any) -> None:
    # 1 - 6 sum d^2 / (n (n^2 - 1)) over every order of five values
    xs = [0.1, 0.5, 0.2, 0.9, 0.3]
    for perm in itertools.permutations(range(5)):
        ys = [float(p) for p in perm]
        rx = [sorted(xs).index(x) for x in xs]
        d2 = sum((a - b) ** 2 for a, b in zip(rx, perm))
        assert pf.spearman(xs, ys) == pytest.approx(1 - 6 * d2 / (5 * 24))
    assert pf.spearman([1.0, 2.0], [2.0, 1.0]) != pf.spearman([1.0, 2.0], [2.0, 1.0])  # NaN under 3 points
