"""Issue 40, the hetero search's compiled step (``milp_partition/hetero/_hetero.c``): the same values as numpy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import native
from milp_partition.hetero.search import _two_step_numpy, search

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
needs_native = pytest.mark.skipif(not native.available(), reason="the C extension is not built (setup.py build_ext)")


def _definition(nxt: np.ndarray, d: int, t0: int, t1: int) -> np.ndarray:
    rows, width = nxt.shape
    want = np.full((rows, width), math.inf)
    for n in range(d + 1):
        if (n > 0 and not t0) or (n < d and not t1):
            continue
        for a in range(width):
            if a - n * t0 >= 0:
                want[:, a] = np.minimum(want[:, a], nxt[:, a - n * t0] + (d - n) * t1)
    return want


@needs_native
def test_compiled_two_column_step_equals_numpy_and_the_definition() -> None:
    """Random tables of whole device counts with holes (inf), every tp pair, D below and above the width (the
    window shorter and longer than the residue's run): the C step, the numpy step and the definition agree exactly."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        rows, width, d = int(rng.integers(1, 5)), int(rng.integers(1, 60)), int(rng.integers(1, 70))
        t0, t1 = int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 1, 2, 4]))
        nxt = rng.integers(0, 300, size=(rows, width)).astype(float)
        nxt[rng.random((rows, width)) < 0.3] = math.inf
        got = native.two_step(nxt, d, t0, t1)
        assert got is not None
        want = _definition(nxt, d, t0, t1)
        assert np.array_equal(got, want), (d, t0, t1)
        assert np.array_equal(_two_step_numpy(nxt, d, t0, t1), want)


@needs_native
def test_search_is_the_same_with_and_without_the_compiled_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole search on a tiny two-column setting (every tp, P up to 4) with the C step and with numpy alone:
    the same plan value, bound and node count (the same tree)."""
    from tests.test_hetero import _tiny

    if not HETERO.is_dir():
        pytest.skip("../shared/benchmarks/hetero is not here")
    problem = _tiny("sailor", 3, 3)
    with_c = search(problem, Budget.starting_now(60.0))
    monkeypatch.setenv("MILP_PARTITION_NO_NATIVE", "1")
    assert not native.available()
    without = search(problem, Budget.starting_now(60.0))
    assert with_c.complete and without.complete
    assert with_c.value == without.value and with_c.bound == without.bound
    assert with_c.nodes == without.nodes
