"""networkx node-link data and conversion to and from networkx graphs."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from milp_partition.cluster import Device, make_cluster
from milp_partition.errors import CycleError, InputError
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.io import detect_format, from_networkx, read_instance, to_networkx, write_instance
from milp_partition.io.nodelink import nodelink_from_dict, nodelink_to_dict
from milp_partition.pipeline.problem import Instance

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
BENCH_FILES = sorted((BENCH / "pipeline").glob("*/*.json")) + sorted(
    p for p in (BENCH / "pipedream").glob("*.txt") if not p.name.startswith("LICENSE")
)


def test_benchmark_files_found() -> None:
    assert len(BENCH_FILES) == 13


def _key(edge: Edge) -> tuple[str, str]:
    return edge.source, edge.target


@pytest.mark.parametrize("path", BENCH_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_networkx_and_file_round_trip(path: Path, tmp_path: Path) -> None:
    inst = read_instance(path)
    g = to_networkx(inst.graph)
    assert g.number_of_nodes() == len(inst.graph.nodes)
    assert g.number_of_edges() == len(inst.graph.edges)
    assert nx.is_directed_acyclic_graph(g)
    back_nx = from_networkx(g)
    # networkx lists edges by source node, not in insertion order
    assert back_nx.nodes == inst.graph.nodes
    assert sorted(back_nx.edges, key=_key) == sorted(inst.graph.edges, key=_key)
    assert (back_nx.name, back_nx.time_unit) == (inst.graph.name, inst.graph.time_unit)
    out = tmp_path / "g.json"
    write_instance(inst, out, fmt="nodelink")
    assert detect_format(out) == "nodelink"
    back = read_instance(out)
    assert back.graph == inst.graph
    assert back.cluster == inst.cluster


def _small() -> Instance:
    nodes = [
        Node("a", forward_time=1.5, time_by_kind={"cpu": 9.0}, allowed_kinds=("gpu",), flops=2e9),
        Node("b", backward_time=0.25, param_bytes=64, colocation_group="x", is_backward=True),
    ]
    graph = make_graph(nodes, [Edge("a", "b", bytes=32, transfer_time=0.5)], name="small", time_unit="ms")
    return Instance(graph, make_cluster([Device("gpu0", "gpu", 1024)], host_cpu_cores=2))


@pytest.mark.parametrize("key", ["edges", "links"])
def test_reads_what_networkx_writes(tmp_path: Path, key: str) -> None:
    inst = _small()
    data = nx.node_link_data(to_networkx(inst.graph), edges=key)
    path = tmp_path / "nx.json"
    path.write_text(json.dumps(data))
    back = read_instance(path)
    assert back.graph == inst.graph
    assert back.cluster is None


def test_our_layout_matches_networkx() -> None:
    inst = _small()
    ours = nodelink_to_dict(inst)
    theirs = json.loads(json.dumps(nx.node_link_data(to_networkx(inst.graph), edges="edges")))
    assert {k: v for k, v in ours["graph"].items() if k != "cluster"} == theirs["graph"]
    assert ours["directed"] is theirs["directed"] is True
    assert ours["multigraph"] is theirs["multigraph"] is False
    for a, b in zip(ours["nodes"], theirs["nodes"], strict=True):
        assert a == b
    for a, b in zip(ours["edges"], theirs["edges"], strict=True):
        assert a == b
    g = nx.node_link_graph(ours, edges="edges")
    assert from_networkx(g) == inst.graph


def test_from_networkx_defaults_and_integer_keys() -> None:
    g = nx.DiGraph()
    g.add_edge(1, 2, bytes=5, color="red")
    g.nodes[1]["forward_time"] = 2.0
    g.nodes[1]["label"] = "ignored"
    graph = from_networkx(g, name="n", time_unit="s")
    assert graph.nodes == (Node("1", forward_time=2.0), Node("2"))
    assert graph.edges == (Edge("1", "2", bytes=5),)
    assert (graph.name, graph.time_unit) == ("n", "s")


def test_from_networkx_errors() -> None:
    with pytest.raises(InputError, match="DiGraph"):
        from_networkx(nx.Graph([(1, 2)]))
    g = nx.DiGraph([("a", "b"), ("b", "a")])
    with pytest.raises(CycleError, match="a -> b -> a"):
        from_networkx(g)
    g = nx.DiGraph()
    g.add_node("a", forward_time="slow")
    with pytest.raises(InputError, match="node 'a' field 'forward_time': must be a number, got 'slow'"):
        from_networkx(g)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"directed": False}, "must be directed"),
        ({"multigraph": True}, "multigraph"),
        ({"links": []}, "both 'edges' and 'links'"),
        ({"graph": {"time_unit": "fortnight"}}, "graph attribute 'time_unit'"),
        ({"graph": {"name": 3}}, "graph attribute 'name'"),
    ],
)
def test_bad_nodelink(change: dict, expected: str) -> None:
    data = nodelink_to_dict(_small()) | change
    with pytest.raises(InputError, match=expected) as err:
        nodelink_from_dict(data, "nl.json")
    assert str(err.value).startswith("nl.json")


def test_bad_node_attribute_names_node_and_field(tmp_path: Path) -> None:
    data = nodelink_to_dict(_small())
    data["nodes"][1]["param_bytes"] = 1.5
    path = tmp_path / "nl.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"nl\.json: node 'b' field 'param_bytes': must be a whole number"):
        read_instance(path)
