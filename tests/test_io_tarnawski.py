"""Reading and writing the Tarnawski et al. (NeurIPS 2020) JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from milp_partition.cluster import Device, Link, make_cluster
from milp_partition.errors import InputError
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.io import detect_format, read_instance, write_instance
from milp_partition.io.tarnawski import read_tarnawski, tarnawski_from_dict, write_tarnawski
from milp_partition.pipeline.problem import Instance

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
FILES = sorted((BENCH / "pipeline").glob("*/*.json"))


def test_all_seven_files_found() -> None:
    assert len(FILES) == 7


@pytest.fixture(params=FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def bench(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_counts_and_cluster(bench: Path) -> None:
    raw = json.loads(bench.read_text())
    inst = read_instance(bench)
    assert detect_format(bench) == "tarnawski"
    assert len(inst.graph.nodes) == len(raw["nodes"])
    assert len(inst.graph.edges) == len(raw["edges"])
    assert inst.graph.time_unit == "unitless"
    assert inst.graph.name == bench.stem
    assert inst.source == str(bench)
    cluster = inst.cluster
    assert cluster is not None
    assert len(cluster.devices) == raw["maxFPGAs"]
    assert {d.memory_bytes for d in cluster.devices} == {int(raw["maxSizePerFPGA"])}
    assert {d.kind for d in cluster.devices} == {"gpu"}
    assert cluster.host_cpu_cores == raw["maxCPUs"]


def test_node_and_edge_mapping(bench: Path) -> None:
    raw = json.loads(bench.read_text())
    graph = read_instance(bench, fmt="tarnawski").graph
    for rn in raw["nodes"]:
        node = graph.node(str(rn["id"]))
        backward = bool(rn["isBackwardNode"])
        assert node.name == rn["name"]
        assert node.is_backward is backward
        assert node.forward_time == (0.0 if backward else rn["fpgaLatency"])
        assert node.backward_time == (rn["fpgaLatency"] if backward else 0.0)
        assert node.total_time == rn["fpgaLatency"]
        assert node.time_by_kind == {"cpu": rn["cpuLatency"]}
        assert node.other_bytes == rn["size"] and isinstance(node.other_bytes, int)
        assert node.param_bytes == node.activation_bytes == 0
        assert node.colocation_group == (str(rn["colorClass"]) if "colorClass" in rn else None)
        assert node.allowed_kinds == (None if rn["supportedOnFpga"] else ("cpu",))
    for re_, edge in zip(raw["edges"], graph.edges, strict=True):
        assert (edge.source, edge.target) == (str(re_["sourceId"]), str(re_["destId"]))
        assert edge.transfer_time == re_["cost"]
        assert edge.bytes == int(re_["size"])


def test_round_trip(bench: Path, tmp_path: Path) -> None:
    inst = read_tarnawski(bench)
    out = tmp_path / bench.name
    write_tarnawski(inst, out)
    back = read_instance(out)
    assert back.graph == inst.graph
    assert back.cluster == inst.cluster
    write_instance(back, tmp_path / "again.json", fmt="tarnawski")
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads(out.read_text())


def _raw(**top: object) -> dict:
    data = {
        "maxSizePerFPGA": 1000.0,
        "maxFPGAs": 2,
        "maxCPUs": 1,
        "nodes": [
            {
                "name": "a",
                "id": 1,
                "supportedOnFpga": 1,
                "cpuLatency": 2.0,
                "fpgaLatency": 1.0,
                "isBackwardNode": 0,
                "colorClass": 1,
                "size": 10.0,
            },
            {
                "name": "b",
                "id": 2,
                "supportedOnFpga": False,
                "cpuLatency": 3.0,
                "fpgaLatency": 0.5,
                "isBackwardNode": True,
                "size": 0,
            },
        ],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.25, "size": 0.125}],
    }
    data.update(top)
    return data


def test_flags_as_bools_or_ints_and_missing_color_class() -> None:
    graph = tarnawski_from_dict(_raw(), "x.json").graph
    a, b = graph.nodes
    assert a.allowed_kinds is None and not a.is_backward and a.colocation_group == "1"
    assert b.allowed_kinds == ("cpu",) and b.is_backward and b.colocation_group is None
    assert b.backward_time == 0.5 and b.forward_time == 0.0
    assert graph.edges[0].bytes == 0 and graph.edges[0].transfer_time == 0.25


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("size", 1.5, "whole number"),
        ("size", -4.0, "must not be negative"),
        ("supportedOnFpga", 2, "must be 0, 1, false or true"),
        ("isBackwardNode", "yes", "must be 0, 1, false or true"),
        ("fpgaLatency", "fast", "must be a number"),
        ("cpuLatency", float("nan"), "finite"),
    ],
)
def test_bad_node_fields(field: str, value: object, expected: str) -> None:
    data = _raw()
    data["nodes"][0][field] = value
    with pytest.raises(InputError, match=expected) as err:
        tarnawski_from_dict(data, "t.json")
    assert f"t.json: node '1' field '{field}'" in str(err.value)


def test_missing_required_top_level_field() -> None:
    data = _raw()
    del data["maxFPGAs"]
    with pytest.raises(InputError, match="missing required field 'maxFPGAs'"):
        tarnawski_from_dict(data, "t.json")


def _writable() -> Instance:
    return tarnawski_from_dict(_raw(), "t.json")


def test_writer_round_trips_small_instance(tmp_path: Path) -> None:
    inst = _writable()
    write_tarnawski(inst, tmp_path / "t.json")
    back = read_tarnawski(tmp_path / "t.json")
    assert back.graph == dataclasses.replace(inst.graph, name="t")
    assert back.cluster == inst.cluster


def _with_node(inst: Instance, **changes: Any) -> Instance:
    nodes = list(inst.graph.nodes)
    nodes[0] = dataclasses.replace(nodes[0], **changes)
    return dataclasses.replace(inst, graph=make_graph(nodes, inst.graph.edges, time_unit=inst.graph.time_unit))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"param_bytes": 8}, "other_bytes only"),
        ({"op_type": "Conv"}, "op_type"),
        ({"flops": 1e9}, "flops"),
        ({"time_by_kind": {}}, "time_by_kind"),
        ({"allowed_kinds": ("gpu",)}, "allowed_kinds"),
        ({"backward_time": 1.0}, "backward_time"),
        ({"colocation_group": "block1"}, "colocation_group"),
    ],
)
def test_writer_rejects_what_the_format_cannot_hold(tmp_path: Path, changes: dict, expected: str) -> None:
    with pytest.raises(InputError, match=expected) as err:
        write_tarnawski(_with_node(_writable(), **changes), tmp_path / "out.json")
    assert "cannot be written in the Tarnawski format" in str(err.value)
    assert "node '1'" in str(err.value)
    assert not (tmp_path / "out.json").exists()


def test_writer_rejects_non_integer_ids_units_links_and_clusters(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    inst = _writable()
    renamed = make_graph(
        [dataclasses.replace(n, id=f"n{n.id}") for n in inst.graph.nodes],
        [Edge(f"n{e.source}", f"n{e.target}", e.bytes, e.transfer_time) for e in inst.graph.edges],
    )
    cases = [
        (dataclasses.replace(inst, graph=renamed), "id must be an integer"),
        (dataclasses.replace(inst, cluster=None), "no cluster"),
        (dataclasses.replace(inst, graph=dataclasses.replace(inst.graph, time_unit="ms")), "time unit"),
        (
            dataclasses.replace(inst, cluster=make_cluster([Device("gpu0", "gpu", 10), Device("gpu1", "tpu", 10)])),
            "identical",
        ),
        (dataclasses.replace(inst, cluster=make_cluster([Device("gpu0", "gpu", None)])), "unbounded"),
        (dataclasses.replace(inst, cluster=make_cluster([Device("gpu0", "gpu", 10)], link=Link(1e-5, 1e9))), "link"),
        (dataclasses.replace(inst, graph=make_graph(inst.graph.nodes, [Edge("1", "2")])), "transfer_time"),
    ]
    for bad, expected in cases:
        with pytest.raises(InputError, match=expected):
            write_tarnawski(bad, out)


def test_node_without_fpga_latency_is_still_detected(tmp_path: Path) -> None:
    data = _raw()
    del data["nodes"][1]["fpgaLatency"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"t\.json: node '2': missing required field 'fpgaLatency'"):
        read_instance(path)


def test_nodes_keep_file_order() -> None:
    graph = tarnawski_from_dict(_raw(), "t.json").graph
    assert [n.id for n in graph.nodes] == ["1", "2"]
    assert isinstance(graph.nodes[0], Node)
