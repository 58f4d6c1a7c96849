"""The native JSON format and the standalone cluster file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from milp_partition.cluster import Device, Link, make_cluster
from milp_partition.errors import InputError
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.io import detect_format, read_cluster, read_instance, write_cluster, write_instance
from milp_partition.io.native import FORMAT, dumps, instance_to_dict, loads, read_native, write_native
from milp_partition.pipeline.problem import Instance

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "benchmarks"
BENCH_FILES = sorted((BENCH / "pipeline").glob("*/*.json")) + sorted(
    p for p in (BENCH / "pipedream").glob("*.txt") if not p.name.startswith("LICENSE")
)


def test_benchmark_files_found() -> None:
    assert len(BENCH_FILES) == 13


@pytest.mark.parametrize("path", BENCH_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round_trip_every_benchmark(path: Path, tmp_path: Path) -> None:
    inst = read_instance(path)
    out = tmp_path / "graph.json"
    write_instance(inst, out)
    assert detect_format(out) == "native"
    back = read_instance(out)
    assert back.graph == inst.graph
    assert back.cluster == inst.cluster
    assert back.source == str(out)


def _rich_instance() -> Instance:
    nodes = [
        Node("a", name="input", op_type="Input", forward_time=0.1 + 0.2, flops=1e12 / 3, activation_bytes=2**40 + 1),
        Node(
            "b",
            forward_time=1.0 / 3,
            backward_time=2.5e-7,
            time_by_kind={"cpu": 7.25, "tpu": 0.0},
            param_bytes=123,
            other_bytes=7,
            colocation_group="g1",
            allowed_kinds=("gpu", "tpu"),
        ),
        Node("b_grad", backward_time=3.0, is_backward=True, colocation_group="g1", allowed_kinds=("cpu",)),
    ]
    edges = [Edge("a", "b", bytes=10, transfer_time=0.001), Edge("b", "b_grad", bytes=0)]
    cluster = make_cluster(
        [Device("gpu0", "gpu", 16 * 2**30), Device("tpu0", "tpu", None)],
        host_cpu_cores=4,
        link=Link(1e-5, math.inf),
    )
    return Instance(make_graph(nodes, edges, name="rich", time_unit="us"), cluster)


def test_round_trip_every_field(tmp_path: Path) -> None:
    inst = _rich_instance()
    path = tmp_path / "rich.json"
    write_native(inst, path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT
    assert data["cluster"]["link"]["bandwidth_bytes_per_s"] is None
    assert set(data["nodes"][0]) == {f for f in Node.__dataclass_fields__}
    back = read_native(path)
    assert back.graph == inst.graph
    assert back.cluster == inst.cluster
    assert back.graph.node("b").allowed_kinds == ("gpu", "tpu")
    assert back.graph.nodes[0].forward_time == 0.1 + 0.2


def test_dumps_loads_and_one_node_per_line() -> None:
    inst = _rich_instance()
    text = dumps(inst)
    assert sum(1 for line in text.splitlines() if line.lstrip().startswith('{"id"')) == 3
    back = loads(text, "mem")
    assert back.graph == inst.graph and back.cluster == inst.cluster
    assert instance_to_dict(back) == json.loads(text)


def test_only_id_is_required() -> None:
    text = json.dumps({"format": FORMAT, "nodes": [{"id": "x"}, {"id": "y"}], "edges": [{"source": "x", "target": "y"}]})
    inst = loads(text, "m.json", default_name="m")
    assert inst.graph.nodes == (Node("x"), Node("y"))
    assert inst.graph.edges == (Edge("x", "y"),)
    assert inst.graph.name == "m" and inst.graph.time_unit == "unitless"
    assert inst.cluster is None


def test_integer_ids_and_integral_float_bytes() -> None:
    text = json.dumps(
        {
            "format": FORMAT,
            "nodes": [{"id": 1, "param_bytes": 1024.0}, {"id": 2}],
            "edges": [{"source": 1, "target": 2, "bytes": 8.0}],
        }
    )
    graph = loads(text).graph
    assert [n.id for n in graph.nodes] == ["1", "2"]
    assert graph.nodes[0].param_bytes == 1024 and isinstance(graph.nodes[0].param_bytes, int)
    assert graph.edges[0].bytes == 8 and isinstance(graph.edges[0].bytes, int)


def test_tiny_example() -> None:
    inst = read_instance(ROOT / "examples" / "tiny.json")
    assert 8 <= len(inst.graph.nodes) <= 10
    assert inst.graph.time_unit == "ms"
    assert inst.cluster is not None
    assert [d.memory_bytes for d in inst.cluster.devices] == [16 * 2**30] * 2
    assert inst.cluster.link == Link(1e-5, 1e10)
    fan_out = {e.source for e in inst.graph.edges if sum(f.source == e.source for f in inst.graph.edges) > 1}
    assert fan_out, "the example should branch (a diamond)"


def test_cluster_file_round_trip(tmp_path: Path) -> None:
    cluster = _rich_instance().cluster
    assert cluster is not None
    path = tmp_path / "cluster.json"
    write_cluster(cluster, path)
    assert json.loads(path.read_text())["format"] == "milp-partition-cluster/1"
    assert read_cluster(path) == cluster


def test_cluster_file_defaults(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"format": "milp-partition-cluster/1", "devices": [{"id": "g"}]}))
    assert read_cluster(path) == make_cluster([Device("g", "gpu", None)])


def test_cluster_and_graph_files_are_not_confused(tmp_path: Path) -> None:
    cluster_path = tmp_path / "cluster.json"
    write_cluster(make_cluster([Device("g")]), cluster_path)
    with pytest.raises(InputError, match="cluster file, not a graph"):
        read_instance(cluster_path)
    graph_path = tmp_path / "graph.json"
    write_native(_rich_instance(), graph_path)
    with pytest.raises(InputError, match="graph file, not a cluster file"):
        read_cluster(graph_path)


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ({"devices": [{"id": "g", "memory_bytes": "16GB"}]}, "device 'g' field 'memory_bytes': must be a number"),
        ({"devices": [{"id": "g", "memory_bytes": 1.5}]}, "device 'g' field 'memory_bytes': must be a whole number"),
        ({"devices": [{"id": "g"}], "link": {"latency_s": "fast"}}, "cluster link field 'latency_s': must be a number"),
        ({"devices": [{"id": "g"}], "link": {"bandwidth_bytes_per_s": float("inf")}}, "write null for infinite"),
        ({"devices": [{"id": "g"}], "host_cpu_cores": 1.5}, "field 'host_cpu_cores': must be a non-negative integer"),
        ({"devices": [{"kind": "gpu"}]}, "cluster devices[0]: missing required field 'id'"),
        ({"devices": [{"id": "g", "memory": 1}]}, "unknown field 'memory'; did you mean 'memory_bytes'?"),
        ({"devices": []}, "no device"),
        ({"devices": [{"id": "g"}, {"id": "g"}]}, "duplicate device id"),
    ],
)
def test_bad_cluster(tmp_path: Path, cluster: dict, expected: str) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"format": FORMAT, "nodes": [{"id": "a"}], "cluster": cluster}))
    with pytest.raises(InputError) as err:
        read_instance(path)
    assert str(err.value).startswith(str(path))
    assert expected in str(err.value)


def test_unknown_version_and_missing_format(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"format": "milp-partition/2", "nodes": []}))
    with pytest.raises(InputError, match=r"format version 'milp-partition/2' is not supported.*'milp-partition/1'"):
        read_instance(path)
    path.write_text(json.dumps({"nodes": [{"id": "a"}]}))
    with pytest.raises(InputError, match='missing field "format"; add "format": "milp-partition/1"'):
        read_instance(path, fmt="native")


def test_unknown_fields_are_rejected_with_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"format": FORMAT, "nodes": [{"id": "a", "forward_tim": 1}]}))
    with pytest.raises(InputError, match="node 'a': unknown field 'forward_tim'; did you mean 'forward_time'"):
        read_instance(path)
    path.write_text(json.dumps({"format": FORMAT, "nodes": [{"id": "a"}], "edge": []}))
    with pytest.raises(InputError, match="top level: unknown field 'edge'; did you mean 'edges'"):
        read_instance(path)


def test_bad_time_unit(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"format": FORMAT, "time_unit": "hours", "nodes": [{"id": "a"}]}))
    with pytest.raises(InputError, match="field 'time_unit': must be one of s, ms, us, ns, unitless"):
        read_instance(path)


def test_write_rejects_unknown_format_and_nan(tmp_path: Path) -> None:
    inst = _rich_instance()
    with pytest.raises(InputError, match="cannot write format 'pipedream'"):
        write_instance(inst, tmp_path / "x.txt", fmt="pipedream")
    bad = Instance(make_graph([Node("a")], []), make_cluster([Device("g")], link=Link(math.inf)))
    with pytest.raises(InputError, match="NaN or infinite"):
        write_instance(bad, tmp_path / "bad.json")
