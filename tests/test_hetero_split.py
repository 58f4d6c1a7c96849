"""The split by devices of a setting with one kind in two regions (:func:`milp_partition.hetero.pooled.split_bound`),
against brute force: every plan of tiny settings enumerated, each with its devices.  The capped pool must be at most
every plan of at most N_A devices (the larger region's), the region pools' search restricted to the triples that can
hold more devices at most every plan of more, their least at most the optimum, and the solve must prove the brute-force
optimum; two broken variants (the cap one device short, the triples' device count without the tp) must be caught."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from milp_partition.budget import Budget
from milp_partition.chain import Status
from milp_partition.hetero import pooled as pooled_module
from milp_partition.hetero import search as search_module
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import capped_pool_problem, device_split, region_groups
from milp_partition.hetero.pooled import PoolOutcome, pooled_bound, split_bound
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from tests.test_hetero import HETERO, _plans
from tests.test_hetero_pool import ZONED, _zoned
from tests.test_hetero_regions import SPANNING

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")

#: One kind in two regions (us-central1, us-west1), 3 or 4 devices: A100-40 and V100-16, regions of equal and unequal
#: size, zones of one region with different fits (no link order is assumed by the split).
SPLIT = [
    *SPANNING,  # the spanning bound's four (tests/test_hetero_regions.py)
    {"V100-16_us-central1-a": 3, "V100-16_us-west1-b": 1},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-f": 2, "A100-40_us-west1-b": 1},
]
#: (blocks, global batch): 5 layers and many micro-batches; 4 layers and few.
SHAPES = [(3, 512), (2, 64)]


def _devices(plan: HeteroPlan) -> int:
    return sum(r.tp for row in plan.replicas for r in row)


def _by_devices(problem: HeteroProblem, split: int) -> tuple[float, float]:
    """(least seconds of a plan of at most ``split`` devices, of a plan of more; inf where none)."""
    small, big = math.inf, math.inf
    for plan in _plans(problem):
        v = evaluate(problem, plan).iteration_s
        if _devices(plan) <= split:
            small = min(small, v)
        else:
            big = min(big, v)
    return small, big


def test_the_split_applies_to_one_kind_in_two_regions_only() -> None:
    assert device_split(_zoned(SPLIT[0])) == 2
    assert device_split(_zoned(SPLIT[4])) == 3
    assert device_split(_zoned(ZONED[0])) is None  # one region
    assert device_split(_zoned({"A100-40_us-central1-a": 1, "V100-16_us-west1-b": 1})) is None  # two kinds


def test_the_capped_pool_cuts_every_pooled_count() -> None:
    capped = capped_pool_problem(_zoned(SPLIT[0]), 3)
    assert [c.count for c in capped.cluster.columns] == [3]


@pytest.mark.parametrize("objective", ["sailor", "sound"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("counts", SPLIT)
def test_each_part_bounds_its_plans_and_the_split_bounds_the_optimum(
    counts: dict[str, int], shape: tuple[int, int], objective: str
) -> None:
    """The capped pool's proven bound is at most every plan of at most N_A devices, the restricted region search's at
    most every plan of more (a bound above one of them would be a false proof), and their least at most the optimum;
    both searches run to the end here, so the split's bound is a value of some pooled plan."""
    problem = _zoned(counts, blocks=shape[0], global_batch=shape[1], objective=objective)
    split = device_split(problem)
    assert split is not None
    small, big = _by_devices(problem, split)
    assert math.isfinite(small)
    got = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0))
    assert got.small.complete and got.small.bound_s is not None
    assert got.small.bound_s <= small * (1 + 1e-12)
    assert got.big is not None and got.big.complete and got.big.bound_s is not None
    if math.isfinite(big):
        assert got.big.bound_s <= big * (1 + 1e-12)
    assert got.bound_s is not None and got.bound_s <= min(small, big) * (1 + 1e-12)
    assert got.plan is not None and got.value_s >= min(small, big) * (1 - 1e-12)


@pytest.mark.parametrize("counts", SPLIT)
def test_the_solve_with_the_split_proves_the_brute_force_optimum(counts: dict[str, int]) -> None:
    """With the exact search after the split (``pool_stop_gap=0``), status, value and bound are the brute force's."""
    problem = _zoned(counts)
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0, pool_stop_gap=0.0))
    assert res.status == Status.OPTIMAL.value
    assert res.objective == pytest.approx(want, rel=1e-12)
    assert res.bound is not None and res.bound <= want * (1 + 1e-9)
    assert [n["devices"] for n in res.solver_notes["pooled"]] == [f"<= {device_split(problem)}", f"> {device_split(problem)}"]


def test_a_cap_one_device_short_is_a_false_proof() -> None:
    """The broken variant: the capped pool at N_A - 1 devices.  On some tiny setting its bound is above the best plan
    of at most N_A devices (the plans of exactly N_A devices are left out): the check above would catch it."""
    caught = 0
    for counts in SPLIT:
        problem = _zoned(counts)
        split = device_split(problem)
        assert split is not None
        small, _big = _by_devices(problem, split)
        wrong = pooled_bound(problem, Budget.starting_now(60.0), cap=split - 1)
        assert wrong.bound_s is not None
        caught += wrong.bound_s > small * (1 + 1e-9)
    assert caught > 0


def test_counting_a_triple_s_devices_without_the_tp_is_a_false_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: a triple's most devices taken as D P (every replica at tp 1), so that the restricted search
    leaves out triples whose plans of larger tps hold more than N_A devices.  On some tiny setting the split's bound
    is then above the optimum; with the tp it never is (the test above)."""
    monkeypatch.setattr(search_module, "_tp_max", lambda cfgs: 1 if cfgs else 0)
    caught = 0
    for counts in SPLIT:
        for blocks, batch in SHAPES:
            problem = _zoned(counts, blocks=blocks, global_batch=batch)
            split = device_split(problem)
            assert split is not None
            want = min(_by_devices(problem, split))
            got = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0))
            caught += got.bound_s is not None and got.bound_s > want * (1 + 1e-9)
    assert caught > 0


def test_the_region_search_covers_all_when_the_capped_pool_gives_no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the capped pool gives no bound (stubbed here), the region search runs on every triple and its bound alone
    is the setting's, at most the optimum (the same as the unrestricted region search's)."""
    problem = _zoned(SPLIT[0])
    split = device_split(problem)
    assert split is not None
    want = min(_by_devices(problem, split))
    real = pooled_module.pooled_bound

    def no_capped_bound(*args: object, **kwargs: object) -> PoolOutcome:
        if kwargs.get("cap") is not None:
            return PoolOutcome()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pooled_module, "pooled_bound", no_capped_bound)
    got = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0))
    assert got.small.bound_s is None
    assert got.bound_s is not None and got.bound_s <= want * (1 + 1e-12)
    assert got.big is not None and got.big.bound_s == got.bound_s
    assert real(problem, Budget.starting_now(60.0), region_groups(problem)).bound_s == pytest.approx(got.bound_s)


@pytest.mark.parametrize("stop_gap", [0.01, 0.2, 0.6])
@pytest.mark.parametrize("counts", SPLIT)
def test_the_region_search_pruned_at_the_stop_gap_stays_a_bound(counts: dict[str, int], stop_gap: float) -> None:
    """``stop_gap``: the region search prunes at (1 - stop_gap) times the best plan's seconds, a threshold with no
    plan.  Its bound must stay at most every plan of more than N_A devices (else a false proof), the setting's at most
    the optimum, and no plan's seconds may be the threshold's: the plan returned is priced and at least the optimum."""
    for blocks, batch in SHAPES:
        problem = _zoned(counts, blocks=blocks, global_batch=batch)
        split = device_split(problem)
        assert split is not None
        small, big = _by_devices(problem, split)
        got = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0), stop_gap=stop_gap)
        assert got.big is not None and got.big.complete and got.big.bound_s is not None
        if math.isfinite(big):
            assert got.big.bound_s <= big * (1 + 1e-12)
        assert got.bound_s is not None and got.bound_s <= min(small, big) * (1 + 1e-12)
        assert got.plan is not None and got.value_s == evaluate(problem, got.plan).iteration_s
        assert got.value_s >= min(small, big) * (1 - 1e-12)


def test_the_stop_gap_prunes_the_region_search() -> None:
    """The threshold is used: with a wide gap the region searches visit fewer nodes in all than the proofs up to the
    best plan; the solve's answer stays within the default gap of its bound."""
    nodes_full = nodes_wide = 0
    for counts in SPLIT:
        for blocks, batch in SHAPES:
            problem = _zoned(counts, blocks=blocks, global_batch=batch)
            split = device_split(problem)
            assert split is not None
            full = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0))
            wide = split_bound(problem, split, Budget.starting_now(60.0), Budget.starting_now(60.0), stop_gap=0.6)
            assert full.big is not None and wide.big is not None
            nodes_full, nodes_wide = nodes_full + full.big.nodes, nodes_wide + wide.big.nodes
    assert nodes_wide < nodes_full
    for counts in SPLIT:
        res = solve_hetero(_zoned(counts), HeteroSolveSettings(time_limit_s=60.0))
        assert res.gap is not None and res.gap <= 0.01 + 1e-12


def test_the_cli_passes_stop_gap_and_refuses_bad_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``solve --stop-gap FRACTION`` sets ``pool_stop_gap`` (default 0.01); a fraction of 1 or more, or one given for a
    problem that does not read it, exits 2 naming the flag; the answer with ``--stop-gap 0`` is the proven optimum."""
    import json

    from milp_partition.cli import hetero as hetero_cli
    from milp_partition.cli.dispatch import main

    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": "OPT-350", "global_batch": 64, "gpus": SPLIT[4]}))
    seen: list[float] = []
    real = hetero_cli.solve_hetero

    def recording(problem: HeteroProblem, settings: HeteroSolveSettings) -> object:
        seen.append(settings.pool_stop_gap)
        return real(problem, settings)

    monkeypatch.setattr(hetero_cli, "solve_hetero", recording)
    out = tmp_path / "out.json"
    assert main(["solve", str(HETERO), "--setting-file", str(f), "-q", "--output", str(out)]) == 0
    assert main(["solve", str(HETERO), "--setting-file", str(f), "-q", "--stop-gap", "0", "--output", str(out)]) == 0
    assert seen == [0.01, 0.0]
    assert json.loads(out.read_text())["status"] == "optimal"
    capsys.readouterr()
    for args in (
        ["solve", str(HETERO), "--setting-file", str(f), "-q", "--stop-gap", "1"],
        ["solve", "examples/bert24_training.json", "-q", "--stop-gap", "0.1"],
    ):
        try:
            code = main(args)
        except SystemExit as exited:  # argparse's own check exits; the problem's refusal returns
            code = exited.code
        assert code == 2
        assert "--stop-gap" in capsys.readouterr().err
    assert len(seen) == 2
