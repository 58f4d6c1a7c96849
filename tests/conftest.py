"""Shared fixtures: paths to the benchmark instances and tiny random problems."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

# torch's CPU kernels (and OpenBLAS) on one thread, before anything imports torch: the tests' models are tiny, and two
# OpenMP threads on a two-core machine whose other core is busy made torch tests 3-60 times slower (CI shares its
# cores).  Only the speed changes; a value set outside is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from milp_partition.cluster import Device, make_cluster
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "benchmarks"


@pytest.fixture(scope="session")
def shared_benchmarks() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"benchmark folder {SHARED} is missing: the tests need ../shared beside the repo")
    return SHARED


def random_pipeline_problem(
    seed: int,
    *,
    max_nodes: int = 8,
    devices: int | None = None,
    contiguous: bool = True,
    binding_memory: bool = False,
    cpu_cores: int = 0,
    backward: bool = False,
    memory_model: str = "static",
) -> PipelineProblem:
    """A random DAG of at most ``max_nodes`` nodes on 2-3 identical accelerators."""
    rng = random.Random(seed)
    n = rng.randint(3, max_nodes)
    k = devices or rng.choice([2, 3])
    is_bwd = [backward and i >= n // 2 and rng.random() < 0.7 for i in range(n)]
    group: dict[int, str] = {}
    for i in range(n):
        twin = i - n // 2  # a backward node may share a group with a forward node
        if is_bwd[i] and twin >= 0 and not is_bwd[twin] and rng.random() < 0.6:
            group[i] = group[twin] = f"g{twin}"
    nodes = [
        Node(
            id=f"n{i}",
            forward_time=0.0 if is_bwd[i] else round(rng.uniform(0.1, 5.0), 3),
            backward_time=round(rng.uniform(0.1, 5.0), 3) if is_bwd[i] else 0.0,
            time_by_kind={"cpu": round(rng.uniform(1.0, 20.0), 3)} if cpu_cores else {},
            param_bytes=rng.randint(0, 40),
            activation_bytes=rng.randint(0, 40),
            other_bytes=rng.randint(0, 20),
            colocation_group=group.get(i),
            is_backward=is_bwd[i],
        )
        for i in range(n)
    ]
    edges = []
    for j in range(1, n):
        for i in range(j):
            if rng.random() < (0.5 if j - i == 1 else 0.2):
                edges.append((i, j))
    out_cost = {i: round(rng.uniform(0.0, 1.5), 3) for i in range(n)}
    graph = make_graph(nodes, [Edge(f"n{i}", f"n{j}", bytes=rng.randint(1, 100), transfer_time=out_cost[i]) for i, j in edges])
    total = sum(nd.param_bytes + nd.activation_bytes + nd.other_bytes for nd in nodes)
    if memory_model == "1f1b":
        total = sum(nd.param_bytes + k * nd.activation_bytes + nd.other_bytes for nd in nodes)
    memory = max(1, int(total / k * rng.uniform(1.05, 1.4))) if binding_memory else None
    cluster = make_cluster([Device(f"gpu{d}", "gpu", memory) for d in range(k)], host_cpu_cores=cpu_cores)
    return PipelineProblem(graph, cluster, PipelineSettings(contiguous=contiguous, memory_model=memory_model))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _ctrl_c_as_python_handles_it() -> Iterator[None]:
    """Each test starts with Ctrl-C raising KeyboardInterrupt and leaves it so: the clean-clone CI at 331514a failed
    test_interrupts and the CBC watchdog test because SIGINT was ignored in both xdist workers (``_thread.interrupt_main``
    does nothing then, and a child inherits the ignore); which earlier test left it so is not found yet."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
