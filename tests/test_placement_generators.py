"""Synthetic placement instances: exact sizes, acyclic, seeded, binding memory, devices and links as asked."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from milp_partition.errors import InputError
from milp_partition.placement.generators import (
    GRAPH_KINDS,
    DeviceSetSettings,
    PlacementGeneratorSettings,
    generate_placement_problem,
)


@pytest.mark.parametrize("kind", GRAPH_KINDS)
@pytest.mark.parametrize("n", [1, 2, 17, 1000])
def test_sizes_and_acyclic(kind, n):
    p = generate_placement_problem(PlacementGeneratorSettings(kind=kind, num_tasks=n, seed=4))
    assert p.num_tasks == n and p.time.shape == (n, 4) and p.comm.shape == (p.num_edges, 4, 4)
    assert (p.edge_source < p.edge_target).all()  # indices are a topological order
    assert len(p.topological_order) == n
    pairs = set(zip(p.edge_source.tolist(), p.edge_target.tolist()))
    assert len(pairs) == p.num_edges
    sources = 16 if kind == "layered" else 1
    indeg = np.bincount(p.edge_target, minlength=n)
    assert (indeg[sources:] > 0).all()  # every task past the first layer (or the input) reads something
    assert np.isfinite(p.time).all() and (p.time > 0).all()
    assert (np.diagonal(p.comm, axis1=1, axis2=2) == 0).all()


@pytest.mark.parametrize("kind", GRAPH_KINDS)
def test_seed_reproducible(kind):
    s = PlacementGeneratorSettings(kind=kind, num_tasks=500, seed=11)
    a, b = generate_placement_problem(s), generate_placement_problem(s)
    for field in ("time", "task_memory", "device_memory", "edge_source", "edge_target", "comm"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    c = generate_placement_problem(PlacementGeneratorSettings(kind=kind, num_tasks=500, seed=12))
    assert not np.array_equal(a.time, c.time)


def test_devices_speed_memory_and_links():
    dv = DeviceSetSettings(
        num_devices=8, speed_factors=(1, 1, 2, 2, 1, 1, 2, 2), memory_slack=1.2, devices_per_node=4, link_jitter=0.0
    )
    p = generate_placement_problem(PlacementGeneratorSettings(kind="transformer", num_tasks=400, seed=1, devices=dv))
    assert np.allclose(p.time[:, 0] / p.time[:, 2], 2.0)
    assert (
        p.device_memory.sum() == pytest.approx(1.2 * p.task_memory.sum(), rel=1e-9)
        or (p.device_memory >= p.task_memory.max()).all()
    )
    e = 0
    intra, inter = p.comm[e, 0, 1], p.comm[e, 0, 4]
    assert inter > intra > 0 and p.comm[e, 0, 1] == p.comm[e, 1, 0]
    unbounded = generate_placement_problem(PlacementGeneratorSettings(num_tasks=50, devices=DeviceSetSettings(memory_slack=None)))
    assert np.isinf(unbounded.device_memory).all()


def test_bad_settings():
    with pytest.raises(InputError, match="graph kind"):
        PlacementGeneratorSettings(kind="ring")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="num_tasks"):
        PlacementGeneratorSettings(num_tasks=0)
    with pytest.raises(InputError, match="speed factor"):
        generate_placement_problem(PlacementGeneratorSettings(devices=DeviceSetSettings(num_devices=3, speed_factors=(1.0,))))


def _python_lines(settings: PlacementGeneratorSettings) -> int:
    """Python lines executed while generating (each loop or comprehension iteration counts): a count, not a time."""
    count = 0

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        count += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        generate_placement_problem(settings)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("kind", GRAPH_KINDS)
def test_python_work_grows_linearly_with_the_tasks(kind):
    # what keeps 200k tasks at seconds: the Python-level work per task is constant (numpy does the rest), so ten
    # times the tasks run at most ten times the lines (a fixed part does not grow); one loop over pairs would run ~100x
    small, large = (_python_lines(PlacementGeneratorSettings(kind=kind, num_tasks=n, seed=0)) for n in (500, 5_000))
    assert large <= 11 * small, (small, large)


def test_200k_tasks_in_seconds():
    # at this size a quadratic step would not finish (its linear growth is checked above by a count, not a clock)
    p = generate_placement_problem(PlacementGeneratorSettings(kind="transformer", num_tasks=200_000, seed=0))
    assert p.num_tasks == 200_000
    assert p.time.shape == (200_000, 4) and p.comm.shape == (p.num_edges, 4, 4) and p.num_edges > 200_000
