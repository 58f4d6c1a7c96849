"""Issue 40, the hetero search's compiled step (``milp_partition/hetero/_hetero.c``): the same values as numpy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import native
from milp_partition.hetero.search import _two_step_numpy, search
from tests.test_hetero import two_step_definition

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
needs_native = pytest.mark.skipif(not native.available(), reason="the C extension is not built (setup.py build_ext)")


@needs_native
def test_compiled_two_column_step_equals_numpy_and_thetwo_step_definition() -> None:
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
        want = two_step_definition(nxt, d, t0, t1)
        assert np.array_equal(got, want), (d, t0, t1)
        assert np.array_equal(_two_step_numpy(nxt, d, t0, t1), want)


@needs_native
@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_search_is_the_same_with_and_without_the_compiled_step(objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole search on a tiny two-column setting (every tp, P up to 4) with the C loops (the device tables and
    the tree's scan of every (end, set) pair) and with numpy alone, under either objective: the same plan value,
    bound and node count (the same tree)."""
    from tests.test_hetero import _tiny

    if not HETERO.is_dir():
        pytest.skip("../shared/benchmarks/hetero is not here")
    problem = _tiny(objective, 3, 3)
    with_c = search(problem, Budget.starting_now(60.0))
    monkeypatch.setattr(native, "_ext", None)
    assert not native.available()
    without = search(problem, Budget.starting_now(60.0))
    assert with_c.complete and without.complete
    assert with_c.value == without.value and with_c.bound == without.bound
    assert with_c.nodes == without.nodes


@needs_native
def test_compiled_weighted_device_suffix_equals_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`_lambda_suffix` (the weighted device budget of the later stages) in C and in numpy on random masks and
    weights (fractional: one over the counts, some inf; never NaN, as the search's are not): exactly the same values, inf where no split is
    allowed; the allowed configurations' bits the same too.  Up to 10 configurations C reads each subset's least
    weight from a table, beyond it configuration by configuration: both are compared."""
    from milp_partition.hetero.search import _lambda_suffix

    rng = np.random.default_rng(5)
    for trial in range(120):
        p, t, l1 = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(2, 12))
        nk = int(rng.integers(1, 7)) if trial % 4 else int(rng.integers(9, 14))
        masks = rng.random((p, nk, l1, l1)) < rng.random()
        w = rng.integers(1, 9, size=(t, nk)) * rng.choice([1.0, 1 / 3, 0.125, 1 / 96], size=(t, 1))
        if trial % 3 == 0:
            w[rng.random(w.shape) < 0.2] = math.inf
        bits = np.full((p, l1, l1), -1, dtype=np.int64)
        got = native.lambda_suffix(masks, w, bits)
        with monkeypatch.context() as mp:
            mp.setattr(native, "_ext", None)
            want_bits = np.full((p, l1, l1), -1, dtype=np.int64)
            want = _lambda_suffix(masks, w, l1 - 1, want_bits)
        assert got is not None and np.array_equal(got, want), (p, nk, t, l1)
        assert np.array_equal(bits, want_bits)
        assert np.array_equal(want_bits, (masks.astype(np.int64) << np.arange(nk)[None, :, None, None]).sum(axis=1))


@needs_native
def test_compiled_admit_first_row_equals_the_full_numpy_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device test before a triple (:func:`_lambda_first_under`): its C form, which computes only the states a
    split from layer 0 reaches, equals the first row of the full numpy program on the masks ``ylb <= thr`` (random
    tables inf wherever e <= s0, as the search's are, with holes; more stages than layers included: inf)."""
    from milp_partition.hetero.search import _lambda_first_under, _lambda_suffix

    rng = np.random.default_rng(23)
    idx = np.arange(12)
    finite = 0
    for _ in range(300):
        p, nk, t, l1 = int(rng.integers(1, 8)), int(rng.integers(1, 7)), int(rng.integers(1, 5)), int(rng.integers(2, 12))
        ylb = rng.random((p, nk, l1, l1)) * 10
        ylb[:, :, ~(idx[None, :l1] > idx[:l1, None])] = math.inf
        ylb[rng.random(ylb.shape) < 0.2] = math.inf
        w = rng.integers(1, 9, size=(t, nk)) * rng.choice([1.0, 1 / 3, 0.125, 1 / 96], size=(t, 1))
        thr = float(rng.random() * 10)
        got = native.lambda_first(ylb, w, thr)
        with monkeypatch.context() as mp:
            mp.setattr(native, "_ext", None)
            want = _lambda_suffix(ylb <= thr, w, l1 - 1)[0, :, 0]
            assert np.array_equal(_lambda_first_under(ylb, thr, w, l1 - 1), want)  # the numpy path of the search
        assert got is not None and np.array_equal(got, want), (p, nk, t, l1)
        assert np.array_equal(_lambda_first_under(ylb, thr, w, l1 - 1), want)  # the C path of the search
        finite += int(np.isfinite(want).all())
    assert 30 < finite < 270  # both kinds of answer are exercised


@needs_native
def test_compiled_two_column_stage_equals_numpy() -> None:
    """One stage of the two-column table: per (s0, e) the step of its tp pair (0: column not allowed), least over e;
    the C stage against the numpy stage and against the step's definition, on random tables and tp pairs."""
    from milp_partition.hetero.search import _Triple

    rng = np.random.default_rng(9)
    tps = [0, 1, 2, 4]
    combos = [(a, b) for a in tps for b in tps if a or b]
    cidx = np.full((5, 5), -1)
    for i, (a, b) in enumerate(combos):
        cidx[a, b] = i
    for _ in range(80):
        l1, width, d = int(rng.integers(2, 10)), int(rng.integers(1, 40)), int(rng.integers(1, 30))
        nxt = rng.integers(0, 200, size=(l1, width)).astype(float)
        nxt[rng.random((l1, width)) < 0.3] = math.inf
        t0m = rng.choice(tps, size=(l1, l1))
        t1m = rng.choice(tps, size=(l1, l1))
        got = native.two_layer(nxt, t0m, t1m, d)
        fake = _Triple.__new__(_Triple)
        fake.L, fake.d, fake.cap0 = l1 - 1, d, width - 1
        want = fake._two_layer_numpy(nxt, t0m, t1m, cidx, combos)
        assert got is not None and np.array_equal(got, want)
        direct = np.full((l1, width), math.inf)
        for s0 in range(l1):
            for e in range(l1):
                if t0m[s0, e] or t1m[s0, e]:
                    direct[s0] = np.minimum(direct[s0], two_step_definition(nxt, d, int(t0m[s0, e]), int(t1m[s0, e]))[e])
        assert np.array_equal(got, direct)


@needs_native
def test_compiled_decided_stage_use_equals_itstwo_step_definition() -> None:
    """The decided stages' two-column use after one more stage (n of D replicas on column 0, n in a range) and the
    fit test's least sum, in C, against their definitions on random vectors of whole device counts with holes."""
    rng = np.random.default_rng(17)
    for _ in range(300):
        width, d = int(rng.integers(1, 60)), int(rng.integers(1, 50))
        t0, t1 = int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 1, 2, 4]))
        nlo = int(rng.integers(0, d + 1))
        nhi = int(rng.integers(nlo, d + 1)) if t0 else nlo
        g = rng.integers(0, 300, size=width).astype(float)
        g[rng.random(width) < 0.3] = math.inf
        want = np.full(width, math.inf)
        for n in range(nlo, nhi + 1):
            for a in range(width):
                if a - n * t0 >= 0:
                    want[a] = min(want[a], g[a - n * t0] + (d - n) * t1)
        got = native.two_use(g, d, t0, t1, nlo, nhi)
        assert got is not None and np.array_equal(got, want), (d, t0, t1, nlo, nhi)
        other = rng.integers(0, 300, size=width).astype(float)
        other[rng.random(width) < 0.3] = math.inf
        assert native.two_fits(g, other) == (g + other[::-1]).min()


@needs_native
@pytest.mark.parametrize(("setting", "objective"), [("opt350-a8-v16", "sailor"), ("gptneo-a32-v96", "sound")])
def test_compiled_split_programs_equal_numpy(setting: str, objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`_Search.root_split` (the split programs under the tp budget) and :meth:`_Search.free_split` (with no
    budget) in C and in numpy: the same least max and least sum at every P and every D (fresh tables on each side)."""
    from milp_partition.hetero.search import _Search, _Tables
    from milp_partition.io.sailor import read_sailor

    if not HETERO.is_dir():
        pytest.skip("../shared/benchmarks/hetero is not here")
    problem = read_sailor(HETERO, setting=setting, objective=objective)  # type: ignore[arg-type]
    mbs = problem.micro_batches()[0]
    fast = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb_fast = _Tables(problem, mbs)
    total = sum(tb_fast.caps)
    got = {(p, d): fast.root_split(tb_fast, p, d) for p in range(1, tb_fast.L + 1) for d in (1, 2, 3, 5, max(1, total // p))}
    free = {p: fast.free_split(tb_fast, p) for p in range(1, tb_fast.L + 1)}
    monkeypatch.setattr(native, "_ext", None)
    slow = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb_slow = _Tables(problem, mbs)
    for (p, d), v in got.items():
        assert slow.root_split(tb_slow, p, d) == v, (p, d)
    for p, v in free.items():
        assert slow.free_split(tb_slow, p) == v, p
    assert any(math.isfinite(v[1]) for v in free.values())


@needs_native
def test_compiled_stage_scan_equals_numpy() -> None:
    """One node's scan of every (end, set) pair (:func:`milp_partition.hetero.search._stage_scan_numpy`, the
    definition) and its C form on random terms with inf and NaN entries, random allowed bits, first and last stages,
    finite and infinite incumbents: the same kept sets per end, in order, and bit for bit the same least bounds and
    least computes."""
    from milp_partition.hetero.search import _stage_scan_numpy

    rng = np.random.default_rng(7)
    kept_pairs = dropped_pairs = 0
    for trial in range(300):
        nq, nt, l1, nk = int(rng.integers(1, 20)), int(rng.integers(1, 6)), int(rng.integers(2, 30)), int(rng.integers(1, 8))
        s = int(rng.integers(0, l1 - 1))
        ends = rng.permutation(np.arange(s + 1, l1))[: int(rng.integers(1, l1 - s))].astype(np.int64)

        nan = trial % 7 == 0

        def arr(*shape: int, nan: bool = nan) -> np.ndarray:
            x = rng.random(shape) * 10
            x[rng.random(shape) < 0.05] = math.inf
            if nan:
                x[rng.random(shape) < 0.02] = math.nan
            return x

        bits = np.array([int(rng.integers(1, 1 << nk)) for _ in range(nq)], dtype=np.int64)
        allowed = rng.integers(0, 1 << nk, size=l1).astype(np.int64)
        arrays = (
            arr(nq, l1, l1),
            arr(nq, l1),
            arr(nq, l1),
            arr(nq, l1, l1),
            bits,
            allowed,
            arr(nq) - (5 if trial % 3 == 0 else 0),
            arr(nq),
            arr(nq),
            arr(l1) * 3,
            arr(l1),
            arr(nq, nt),
            arr(nt),
            arr(nt, l1),
            rng.random(nt) * 30,
        )
        value = math.inf if trial % 5 == 0 else float(rng.random() * 150)
        scalars = (
            float(rng.choice([0, 1, 2])),
            float(rng.choice([0, 1, 2])),
            float(rng.integers(0, 9)),
            2.0,
            1.0,
            3.0,
            0.5,
            1.5,
            value,
            1 - 1e-12,
        )
        last = bool(trial % 4 == 0)
        got = native.stage_scan(arrays, ends, s, last, scalars)
        assert got is not None
        cand, cnt, minlb, basemin = got
        kept = [cand[i, :c].tolist() for i, c in enumerate(cnt.tolist())]
        want_kept, want_min, want_base = _stage_scan_numpy(arrays, ends, s, last, scalars)
        assert kept == want_kept, trial
        assert np.array_equal(minlb, np.array(want_min)) and np.array_equal(basemin, np.array(want_base)), trial
        kept_pairs += sum(map(len, kept))
        dropped_pairs += len(ends) * nq - sum(map(len, kept))
    assert kept_pairs > 100 and dropped_pairs > 100  # both outcomes are exercised


@needs_native
def test_compiled_stage_scan_with_the_two_column_test_equals_its_definition() -> None:
    """The scan's two-column device test in C (a kept set's decided use g2[a] = min over n in [nlo, nhi] with
    a - n t0 >= 0 of g[a - n t0] + (d - n) t1, then min over a of g2[a] + nxt[e][W - 1 - a] <= cap1) against the numpy
    scan filtered by that definition, loop by loop, on random whole-number tables with holes."""
    from milp_partition.hetero.search import _stage_scan_numpy

    rng = np.random.default_rng(13)
    passed = failed = 0
    for trial in range(200):
        nq, nt, l1, w, d = (
            int(rng.integers(1, 12)),
            2,
            int(rng.integers(2, 12)),
            int(rng.integers(1, 40)),
            int(rng.integers(1, 9)),
        )
        s = int(rng.integers(0, l1 - 1))
        ends = np.arange(s + 1, l1, dtype=np.int64)
        arrays = (
            rng.random((nq, l1, l1)),
            rng.random((nq, l1)),
            rng.random((nq, l1)),
            rng.random((nq, l1, l1)),
            np.ones(nq, dtype=np.int64),
            np.ones(l1, dtype=np.int64),
            rng.random(nq),
            rng.random(nq),
            rng.random(nq),
            rng.random(l1),
            rng.random(l1),
            rng.random((nq, nt)),
            rng.random(nt),
            rng.random((nt, l1)),
            np.full(nt, 10.0),
        )
        scalars = (1.0, 1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, math.inf, 1 - 1e-12)  # every pair passes the bound
        g = rng.integers(0, 20, size=w).astype(float)
        g[rng.random(w) < 0.2] = math.inf
        nxt = rng.integers(0, 20, size=(l1, w)).astype(float)
        nxt[rng.random((l1, w)) < 0.3] = math.inf
        twoq = np.array(
            [[int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 1, 2, 4])), int(rng.integers(0, d + 1)), d] for _ in range(nq)],
            dtype=np.int64,
        )
        cap1 = float(rng.integers(0, 30))
        got = native.stage_scan(arrays, ends, s, trial % 3 == 0, scalars, (g, twoq, nxt, d, cap1))
        assert got is not None
        cand, cnt, _minlb, _basemin = got
        kept = [cand[i, :c].tolist() for i, c in enumerate(cnt.tolist())]
        base, _m, _b = _stage_scan_numpy(arrays, ends, s, trial % 3 == 0, scalars)
        want = []
        for row, e in zip(base, ends.tolist()):
            keep_row = []
            for q in row:
                t0, t1, nlo, nhi = (int(x) for x in twoq[q])
                g2 = [
                    min([g[a - n * t0] + (d - n) * t1 for n in range(nlo, nhi + 1) if a - n * t0 >= 0], default=math.inf)
                    for a in range(w)
                ]
                if min(g2[a] + nxt[e][w - 1 - a] for a in range(w)) <= cap1:
                    keep_row.append(q)
                    passed += 1
                else:
                    failed += 1
            want.append(keep_row)
        assert kept == want, trial
    assert passed > 50 and failed > 50


@needs_native
def test_search_on_a_shared_setting_is_the_same_with_and_without_the_compiled_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """opt350-a16-v16 (16 + 16 GPUs, every micro-batch size, the full tree from no incumbent; a generous limit so that
    phase 1 is never cut by the clock): with the C loops and with numpy alone, the same value, bound and node count."""
    if not HETERO.is_dir():
        pytest.skip("../shared/benchmarks/hetero is not here")
    from milp_partition.io.sailor import read_sailor

    problem = read_sailor(HETERO, setting="opt350-a16-v16")
    with_c = search(problem, Budget.starting_now(3600.0))
    monkeypatch.setattr(native, "_ext", None)
    without = search(problem, Budget.starting_now(3600.0))
    assert with_c.complete and without.complete
    assert with_c.value == without.value and with_c.bound == without.bound and with_c.value == with_c.bound
    assert with_c.nodes == without.nodes and with_c.nodes > 100


@needs_native
@pytest.mark.parametrize("setting", ["gptneo-a32-v96", "opt350-a8-v16"])
def test_compiled_allreduce_split_program_equals_numpy(setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`_Search.ar_split`'s program (the least largest all-reduce over j stages from layer 0 under the tp budget)
    in C, which computes only the rows j stages can start at, and in numpy: the same rows for every D and j."""
    from milp_partition.hetero.search import _Search, _Tables
    from milp_partition.io.sailor import read_sailor

    if not HETERO.is_dir():
        pytest.skip("../shared/benchmarks/hetero is not here")
    problem = read_sailor(HETERO, setting=setting)
    rows = {}
    for on in (True, False):
        with monkeypatch.context() as mp:
            if not on:
                mp.setattr(native, "_ext", None)
            srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
            tb = _Tables(problem, 1)
            for d in range(2, sum(tb.caps) + 1):
                srch.ar_split(tb, d, 1)
            rows[on] = {d: tb.ardp_cache[d][0] for d in range(2, sum(tb.caps) + 1)}
    finite = 0
    for d, got in rows[True].items():
        want = rows[False][d]
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want)), d
        finite += sum(int(np.isfinite(a).any()) for a in got)
    assert finite > 20


def _random_tables(rng: np.random.Generator, nan: bool, upper: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Random least-y tables [k][c][s0][e] (holes of inf, NaN where ``nan``, inf wherever e <= s0 where ``upper``, as
    the search's) and allowed masks, for the C programs."""
    p, nk, l1 = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(2, 9))
    ylb = rng.random((p, nk, l1, l1)) * 10
    ylb[rng.random(ylb.shape) < 0.2] = math.inf
    if nan:
        ylb[rng.random(ylb.shape) < 0.05] = math.nan
    if upper:
        ylb[..., np.arange(l1)[None, :] <= np.arange(l1)[:, None]] = math.inf
    return ylb, rng.random(ylb.shape) < 0.7


@needs_native
def test_compiled_crossing_programs_equal_numpy() -> None:
    """The crossing programs of the region search (``span_dp``) on random tables: allowed configurations with holes,
    least y with inf, crossing increments with inf and NaN (0 times inf where a stage has no forward send), every send
    coefficient 0, 1 or 2: the same values as the numpy lines, NaN where numpy has NaN.  Half the tables are inf
    wherever e <= s0 (as the search's), given to C with ``upper`` (it reads less there)."""
    from milp_partition.hetero.search import _inf_below, _span_programs

    rng = np.random.default_rng(5)
    nan_seen = 0
    for trial in range(300):
        ylb, masks = _random_tables(rng, nan=False, upper=trial % 2 == 1)
        upper = _inf_below(ylb)
        assert upper or trial % 2 == 0
        p, nk, l1, _l1 = ylb.shape
        inc_a, inc_b = rng.random((nk, l1)), rng.random((nk, l1))
        if trial % 3 == 0:
            inc_a[rng.random(inc_a.shape) < 0.2] = math.inf
            inc_b[rng.random(inc_b.shape) < 0.1] = math.nan
        ka, kb = rng.integers(0, 3, p).astype(float), rng.integers(0, 3, p).astype(float)
        nmax, nsum = rng.random((p + 1, l1)) * 5, rng.random((p + 1, l1)) * 20
        nmax[rng.random(nmax.shape) < 0.2] = math.inf
        ymin = np.where(masks, ylb, math.inf).min(axis=1)
        got = native.span_dp(masks, ylb, ymin, inc_a, inc_b, ka, kb, nmax, nsum, upper=upper)
        assert got is not None
        with np.errstate(invalid="ignore"):  # (0 times inf)
            want = _span_programs(masks, ylb, ymin, inc_a, inc_b, ka, kb, nmax, nsum)
        for g, w in zip(got, want):
            assert np.array_equal(g, w, equal_nan=True), trial
        nan_seen += any(bool(np.isnan(w).any()) for w in want)
    assert nan_seen > 0


@needs_native
def test_compiled_bottleneck_programs_equal_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caps' bottleneck programs (``bottleneck``: each stage's least y over its allowed configurations, the least
    max and least sum of the later stages' y) on random tables with holes, inf and NaN: the same values as the numpy
    lines of :func:`_bottleneck_arr` (NaN where numpy has NaN).  Half the tables are inf wherever e <= s0 (as the
    search's), given to C with ``upper`` (it reads less there)."""
    from milp_partition.hetero.search import _bottleneck_arr, _inf_below

    rng = np.random.default_rng(3)
    nan_seen = 0
    for trial in range(300):
        ylb, masks = _random_tables(rng, nan=trial % 4 == 0, upper=trial % 2 == 1)
        l1 = ylb.shape[2]
        upper = _inf_below(ylb)
        assert upper or trial % 2 == 0
        got = native.bottleneck(ylb, masks, upper)
        assert got is not None
        with monkeypatch.context() as mp:
            mp.setattr(native, "_ext", None)
            want = _bottleneck_arr(ylb, masks, l1 - 1)
        for g, w in zip(got, want):
            assert np.array_equal(g, w, equal_nan=True), trial
        nan_seen += bool(np.isnan(want[0]).any())
    assert nan_seen > 0
