"""Placement heuristics: always feasible (verifier), never below the brute-force optimum, deterministic, clear errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS, PlacementHeuristicError, run_placement_heuristic

from milp_partition.errors import InputError
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.placement.generators import DeviceSetSettings, PlacementGeneratorSettings, generate_placement_problem
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, make_placement_problem
from milp_partition.verifiers.placement import verify_placement

NAMES = tuple(PLACEMENT_HEURISTICS)
SETTINGS = (
    PlacementSettings(),
    PlacementSettings(link_contention=True),
    PlacementSettings(memory_model="liveness"),
    PlacementSettings(link_contention=True, memory_model="liveness"),
)


def _check(problem: PlacementProblem, name: str) -> float:
    solution = run_placement_heuristic(name, problem)
    report = verify_placement(problem, solution)
    assert report.feasible, (name, problem.name, report.violations[:3])
    assert report.makespan <= report.given_makespan * (1 + 1e-9) + 1e-12
    return report.makespan


# ---------------------------------------------------------------- Moirai instances
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"contention={s.link_contention}-{s.memory_model}")
@pytest.mark.parametrize("instance", ["example-1", "GoogLeNet", "yolov5x"])
def test_moirai_instances_feasible(shared_benchmarks, instance, settings):
    problem = read_placement_instance(shared_benchmarks / "placement" / f"{instance}.json", settings)
    for name in NAMES:
        _check(problem, name)


def test_example1_memory_is_tight_and_respected(shared_benchmarks):
    """Total task memory equals total capacity: a greedy without the fallback packing strands a task."""
    problem = read_placement_instance(shared_benchmarks / "placement" / "example-1.json")
    assert problem.task_memory.sum() == problem.device_memory.sum()
    for name in NAMES:
        sol = run_placement_heuristic(name, problem)
        used = np.bincount(sol.device, weights=problem.task_memory, minlength=problem.num_devices)
        assert (used <= problem.device_memory).all()
        assert verify_placement(problem, sol).makespan >= 30.0  # the proven optimum


# ---------------------------------------------------------------- random graphs with binding memory
CASES = [
    (kind, n, seed, slack)
    for kind, n in (("layered", 60), ("transformer", 80), ("inception", 70), ("layered", 200))
    for seed, slack in ((1, 1.05), (2, 1.3))
]


@pytest.mark.parametrize("kind,n,seed,slack", CASES)
def test_random_binding_memory_feasible(kind, n, seed, slack):
    for i, settings in enumerate(SETTINGS):
        gen = PlacementGeneratorSettings(
            kind=kind, num_tasks=n, seed=seed + 10 * i, width=6, devices=DeviceSetSettings(num_devices=3, memory_slack=slack),
            placement=settings,
        )  # fmt: skip
        problem = generate_placement_problem(gen)
        assert problem.device_memory.sum() < 1.35 * problem.task_memory.sum()  # memory binds
        for name in NAMES:
            _check(problem, name)


def test_forbidden_devices_and_colocation_respected():
    rng = np.random.default_rng(5)
    n, d = 30, 3
    time = rng.uniform(1, 5, size=(n, d))
    time[rng.random((n, d)) < 0.25] = math.inf
    time[np.isinf(time).all(axis=1), 0] = 2.0
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, size=(60, 2)) if a < b})
    comm = rng.uniform(0, 2, size=(len(edges), d, d))
    comm[:, np.arange(d), np.arange(d)] = 0
    groups = [None] * n
    for i in (3, 7, 12):
        groups[i] = "g"
    time[[3, 7, 12]] = rng.uniform(1, 5, size=(3, d))
    mem = rng.uniform(1, 3, size=n)
    for settings in SETTINGS:
        problem = make_placement_problem(
            [f"t{i}" for i in range(n)], ["a", "b", "c"], time, mem, [mem.sum() / 2] * 3,
            [(f"t{a}", f"t{b}") for a, b in edges], comm, colocation=groups, settings=settings,
        )  # fmt: skip
        for name in NAMES:
            _check(problem, name)
            sol = run_placement_heuristic(name, problem)
            assert len({int(sol.device[i]) for i in (3, 7, 12)}) == 1
            assert np.isfinite(time[np.arange(n), sol.device]).all()


# ---------------------------------------------------------------- brute force on tiny graphs
def _brute_force(problem: PlacementProblem) -> float:
    """Least makespan over every assignment and every topological order (static memory, no contention)."""
    n, d = problem.num_tasks, problem.num_devices
    preds = [[] for _ in range(n)]
    for e, (a, b) in enumerate(zip(problem.edge_source.tolist(), problem.edge_target.tolist())):
        preds[b].append((a, e))
    orders = [p for p in itertools.permutations(range(n)) if all(p.index(a) < p.index(i) for i in range(n) for a, _ in preds[i])]
    best = math.inf
    for dev in itertools.product(range(d), repeat=n):
        used = np.bincount(dev, weights=problem.task_memory, minlength=d)
        if (used > problem.device_memory).any() or any(math.isinf(problem.time[i, dev[i]]) for i in range(n)):
            continue
        for order in orders:
            avail = [0.0] * d
            end = [0.0] * n
            for i in order:
                s = max([end[a] + problem.comm[e, dev[a], dev[i]] for a, e in preds[i]], default=0.0)
                t = problem.time[i, dev[i]]
                if t > 0:
                    s = max(s, avail[dev[i]])
                    avail[dev[i]] = s + t
                end[i] = s + t
            best = min(best, max(end))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_never_below_brute_force_optimum(seed):
    rng = np.random.default_rng(100 + seed)
    n, d = (5, 2) if seed % 2 else (4, 3)
    time = rng.integers(1, 8, size=(n, d)).astype(float)
    if seed % 3 == 0:
        time[0] = 0.0  # a virtual input
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.45]
    comm = rng.integers(0, 5, size=(len(edges), d, d)).astype(float)
    comm[:, np.arange(d), np.arange(d)] = 0
    mem = rng.integers(1, 4, size=n).astype(float)
    cap = np.full(d, max(mem.max(), math.ceil(mem.sum() / d * 1.2)))
    problem = make_placement_problem(
        [str(i) for i in range(n)], [f"d{k}" for k in range(d)], time, mem, cap, [(str(a), str(b)) for a, b in edges], comm
    )
    optimum = _brute_force(problem)
    for name in NAMES:
        value = _check(problem, name)
        assert value >= optimum - 1e-9, (name, value, optimum)


# ---------------------------------------------------------------- determinism and errors
def test_deterministic():
    problem = generate_placement_problem(PlacementGeneratorSettings(kind="transformer", num_tasks=300, seed=3))
    for name in NAMES:
        a = run_placement_heuristic(name, problem)
        b = run_placement_heuristic(name, problem)
        assert np.array_equal(a.device, b.device) and np.array_equal(a.start, b.start), name


def test_unknown_heuristic_lists_known_ones():
    problem = generate_placement_problem(PlacementGeneratorSettings(num_tasks=10))
    with pytest.raises(InputError, match="unknown placement heuristic 'foo'; known: heft, m-topo, m-etf, pardnn, heft-iter"):
        run_placement_heuristic("foo", problem)


def test_iterated_heft_never_worse_than_heft(shared_benchmarks):
    for instance in ("example-1", "GoogLeNet", "inceptionv4"):
        problem = read_placement_instance(shared_benchmarks / "placement" / f"{instance}.json")
        assert _check(problem, "heft-iter") <= _check(problem, "heft") * (1 + 1e-12)
    example = read_placement_instance(shared_benchmarks / "placement" / "example-1.json")
    assert _check(example, "heft-iter") == pytest.approx(30.0)  # the proven optimum, memory tight


def test_registry_is_immutable():
    with pytest.raises(TypeError):
        PLACEMENT_HEURISTICS["x"] = None  # type: ignore[index]


def test_memory_too_small_raises_clear_error():
    """Every task fits some device alone, but not all together: each heuristic refuses, never returns an infeasible schedule."""
    n, d = 6, 2
    problem = make_placement_problem(
        [str(i) for i in range(n)], ["a", "b"], np.ones((n, d)), [3.0] * n, [8.0, 8.0],
        [(str(i), str(i + 1)) for i in range(n - 1)], np.ones((n - 1, d, d)) * (1 - np.eye(d)),
    )  # fmt: skip
    for name in NAMES:
        with pytest.raises(PlacementHeuristicError, match="memory"):
            run_placement_heuristic(name, problem)
