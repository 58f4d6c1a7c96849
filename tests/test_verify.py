"""The verifier against hand-computed cases."""

from __future__ import annotations

import pytest

from milp_partition.cluster import Device, Link, make_cluster
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.verifiers.pipeline import verify_pipeline


def _chain_problem(**settings) -> PipelineProblem:
    # a -> b -> c, a -> c ; b -> d
    nodes = [
        Node("a", forward_time=1.0, other_bytes=10),
        Node("b", forward_time=2.0, other_bytes=20, time_by_kind={"cpu": 7.0}),
        Node("c", forward_time=3.0, other_bytes=30),
        Node("d", forward_time=4.0, other_bytes=40, allowed_kinds=("gpu",)),
    ]
    edges = [
        Edge("a", "b", transfer_time=0.5),
        Edge("b", "c", transfer_time=0.25),
        Edge("a", "c", transfer_time=0.5),
        Edge("b", "d", transfer_time=0.25),
    ]
    cluster = make_cluster([Device("g0", "gpu", 60), Device("g1", "gpu", 60)], host_cpu_cores=1)
    return PipelineProblem(make_graph(nodes, edges), cluster, PipelineSettings(**settings))


def test_loads_count_each_transfer_once_per_source_and_direction() -> None:
    p = _chain_problem()
    r = verify_pipeline(p, PipelineSolution({"a": "g0", "b": "g1", "c": "g1", "d": "g1"}))
    # g0: a (1.0) + a's output sent once (0.5), although a feeds b and c on g1
    assert r.loads["g0"] == pytest.approx(1.5)
    # g1: 2 + 3 + 4 + a's output received once (0.5); b's output stays on g1
    assert r.loads["g1"] == pytest.approx(9.5)
    assert r.time_per_sample == pytest.approx(9.5)
    assert r.memory_bytes == {"g0": 10, "g1": 90}


def test_memory_violation_is_reported() -> None:
    p = _chain_problem()
    r = verify_pipeline(p, PipelineSolution({"a": "g0", "b": "g1", "c": "g1", "d": "g1"}))
    # 90 bytes on g1 exceed its 60
    assert not r.feasible
    assert any("g1" in v and "90" in v for v in r.violations)


def test_cpu_core_pays_no_transfer_but_accelerators_do() -> None:
    p = _chain_problem(contiguous=False)  # a, c on g0 with b off it is not contiguous
    r = verify_pipeline(p, PipelineSolution({"a": "g0", "b": "cpu0", "c": "g0", "d": "g1"}))
    assert r.feasible, r.violations
    assert r.loads["cpu0"] == pytest.approx(7.0)
    # g0: a 1 + c 3 + a sends to cpu0 (0.5 once) + receives b's output (0.25)
    assert r.loads["g0"] == pytest.approx(4.75)
    # g1: d 4 + receives b's output (0.25)
    assert r.loads["g1"] == pytest.approx(4.25)


def test_contiguity_violation() -> None:
    p = _chain_problem()
    # a and c on g0, b (on the path a -> b -> c) elsewhere: not contiguous
    sol = PipelineSolution({"a": "g0", "b": "g1", "c": "g0", "d": "g1"})
    r = verify_pipeline(p, sol)
    assert any("not contiguous" in v for v in r.violations)
    relaxed = verify_pipeline(_chain_problem(contiguous=False), sol)
    assert not any("not contiguous" in v for v in relaxed.violations)


def test_allowed_kinds_unknown_device_and_missing_node() -> None:
    p = _chain_problem()
    assert any(
        "may not run" in v
        for v in verify_pipeline(p, PipelineSolution({"a": "g0", "b": "g0", "c": "g0", "d": "cpu0"})).violations
    )
    assert any(
        "unknown device" in v
        for v in verify_pipeline(p, PipelineSolution({"a": "g9", "b": "g0", "c": "g0", "d": "g0"})).violations
    )
    assert any("not assigned" in v for v in verify_pipeline(p, PipelineSolution({"a": "g0"})).violations)


def test_colocation_groups_must_share_a_device() -> None:
    nodes = [
        Node("f", forward_time=1.0, colocation_group="L1"),
        Node("b", backward_time=2.0, is_backward=True, colocation_group="L1"),
    ]
    p = PipelineProblem(make_graph(nodes, [Edge("f", "b")]), make_cluster([Device("g0"), Device("g1")]))
    assert any("colocation group" in v for v in verify_pipeline(p, PipelineSolution({"f": "g0", "b": "g1"})).violations)
    assert verify_pipeline(p, PipelineSolution({"f": "g0", "b": "g0"})).objective == pytest.approx(3.0)


def test_1f1b_memory_and_stage_order() -> None:
    nodes = [
        Node("x", forward_time=1, backward_time=2, param_bytes=10, activation_bytes=5),
        Node("y", forward_time=1, backward_time=1, param_bytes=4, activation_bytes=3),
    ]
    graph = make_graph(nodes, [Edge("x", "y", bytes=1000)], time_unit="ms")
    cluster = make_cluster(
        [Device("g0", "gpu", 100), Device("g1", "gpu", 100)], link=Link(latency_s=0.001, bandwidth_bytes_per_s=1e6)
    )
    p = PipelineProblem(graph, cluster, PipelineSettings(memory_model="1f1b", optimizer_state_factor=3.0))
    r = verify_pipeline(p, PipelineSolution({"x": "g0", "y": "g1"}))
    assert r.feasible
    # stage 0 of 2 keeps 2 micro-batches: 3*10 + 2*5 = 40; stage 1 keeps 1: 3*4 + 1*3 = 15
    assert r.memory_bytes == {"g0": 40, "g1": 15}
    # training profile: the 1000-byte tensor crosses twice (activation, gradient): 2 * (1 ms + 1 ms) = 4 ms
    assert r.loads["g0"] == pytest.approx(3 + 4)
    assert r.loads["g1"] == pytest.approx(2 + 4)
    back = verify_pipeline(p, PipelineSolution({"x": "g1", "y": "g0"}))
    assert any("goes back" in v for v in back.violations)


def test_1f1b_orders_backward_edges_back_and_leaves_forward_backward_edges_free() -> None:
    """Issue 20 item 6: a gradient edge runs to an earlier stage; the edge from a forward node to a backward one is
    not ordered; memory counts each forward node's saved activations once per micro-batch in flight."""
    nodes = [Node("f0", forward_time=1, activation_bytes=5), Node("f1", forward_time=1, activation_bytes=3)]
    nodes += [Node("f0:bwd", backward_time=2, is_backward=True), Node("f1:bwd", backward_time=2, is_backward=True)]
    pairs = [("f0", "f1"), ("f1", "f1:bwd"), ("f1:bwd", "f0:bwd"), ("f0", "f0:bwd")]
    graph = make_graph(nodes, [Edge(u, v) for u, v in pairs])
    cluster = make_cluster([Device("g0", "gpu", 100), Device("g1", "gpu", 100)])
    p = PipelineProblem(graph, cluster, PipelineSettings(memory_model="1f1b"))
    r = verify_pipeline(p, PipelineSolution({"f0": "g0", "f0:bwd": "g0", "f1": "g1", "f1:bwd": "g1"}))
    assert r.feasible, r.violations
    assert r.memory_bytes == {"g0": 2 * 5, "g1": 1 * 3}
    # a backward node on a later stage than the node it sends its gradient to: fine; the reverse is not
    free = verify_pipeline(p, PipelineSolution({"f0": "g0", "f0:bwd": "g0", "f1": "g0", "f1:bwd": "g1"}))
    assert free.feasible, free.violations
    late = verify_pipeline(p, PipelineSolution({"f0": "g0", "f0:bwd": "g1", "f1": "g0", "f1:bwd": "g0"}))
    assert [v for v in late.violations if "backward edge 'f1:bwd' -> 'f0:bwd'" in v]
    back = verify_pipeline(p, PipelineSolution({"f0": "g1", "f0:bwd": "g1", "f1": "g0", "f1:bwd": "g0"}))
    assert any("forward edge 'f0' -> 'f1' goes back" in v for v in back.violations)


def test_memory_objective_respects_time_bound() -> None:
    p = _chain_problem(objective="memory", max_time_per_sample=9.0)
    r = verify_pipeline(p, PipelineSolution({"a": "g0", "b": "g0", "c": "g0", "d": "g1"}))
    # g0: 1 + 2 + 3 + b's output out (0.25) = 6.25; g1: 4 + 0.25 = 4.25; both within 9
    assert r.feasible
    assert r.objective == 60  # g0 holds 10 + 20 + 30
    tight = verify_pipeline(
        _chain_problem(objective="memory", max_time_per_sample=5.0),
        PipelineSolution({"a": "g0", "b": "g0", "c": "g0", "d": "g1"}),
    )
    assert any("time bound" in v for v in tight.violations)
