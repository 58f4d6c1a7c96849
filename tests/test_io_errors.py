"""Every bad input gives an InputError naming the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milp_partition.errors import CycleError, InputError
from milp_partition.io import read_cluster, read_instance
from milp_partition.io.native import FORMAT

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "benchmarks"


def _native(nodes: list, edges: list | None = None) -> str:
    return json.dumps({"format": FORMAT, "nodes": nodes, "edges": edges or []})


def _write(tmp_path: Path, text: str | bytes, name: str = "graph.json") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _message(path: Path | str, fmt: str = "auto") -> str:
    with pytest.raises(InputError) as err:
        read_instance(path, fmt=fmt)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    return message


def test_cycle_prints_the_cycle(tmp_path: Path) -> None:
    text = _native(
        [{"id": "a"}, {"id": "b"}, {"id": "c"}],
        [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}, {"source": "c", "target": "a"}],
    )
    path = _write(tmp_path, text)
    with pytest.raises(CycleError) as err:
        read_instance(path)
    assert str(err.value).startswith(f"{path}: the graph has a cycle: a -> b -> c -> a")
    assert err.value.cycle == ["a", "b", "c"]


def test_self_loop_is_a_cycle(tmp_path: Path) -> None:
    path = _write(tmp_path, _native([{"id": "a"}], [{"source": "a", "target": "a"}]))
    assert "cycle: a -> a" in _message(path)


def test_cycle_in_tarnawski_file(tmp_path: Path) -> None:
    data = json.loads((BENCH / "pipeline" / "LayerGraphs" / "bert24_inference.json").read_text())
    first = data["edges"][0]
    data["edges"].append({"sourceId": first["destId"], "destId": first["sourceId"], "cost": 0.0, "size": 0.0})
    path = _write(tmp_path, json.dumps(data))
    with pytest.raises(CycleError) as err:
        read_instance(path)
    assert str(path) in str(err.value)
    assert f"{first['sourceId']} -> {first['destId']} -> {first['sourceId']}" in str(err.value)


@pytest.mark.parametrize(
    ("nodes", "edges", "expected"),
    [
        ([{"id": "a"}, {"id": "a"}], [], "node 'a': duplicate node id"),
        ([{"id": "a"}], [{"source": "a", "target": "zz"}], "edge 0 ('a' -> 'zz'): refers to unknown node id 'zz'"),
        (
            [{"id": "a"}, {"id": "b"}],
            [{"source": "a", "target": "b"}, {"source": "a", "target": "b"}],
            "edge 1 ('a' -> 'b'): duplicate edge",
        ),
        ([{"id": "a", "forward_time": -1.0}], [], "node 'a' field 'forward_time': must not be negative"),
        ([{"id": "a", "backward_time": -0.5}], [], "node 'a' field 'backward_time': must not be negative"),
        ([{"id": "a"}, {"name": "no id"}], [], "nodes[1]: missing required field 'id'"),
        ([{"id": "a"}, {"id": ""}], [], "nodes[1] field 'id': must be a non-empty string"),
        ([{"id": "a"}, {"id": "b"}], [{"source": "a"}], "edges[0] ('a' -> ?): missing required field 'target'"),
        ([{"id": "a"}, {"id": "b"}], [{"target": "b"}], "edges[0] (? -> 'b'): missing required field 'source'"),
        (
            [{"id": "conv1", "forward_time": "abc"}],
            [],
            "node 'conv1' field 'forward_time': must be a number, got 'abc'",
        ),
        ([{"id": "a", "flops": "1e9"}], [], "node 'a' field 'flops': must be a number or null, got '1e9'"),
        ([{"id": "a", "param_bytes": 1.5}], [], "node 'a' field 'param_bytes': must be a whole number of bytes"),
        ([{"id": "a", "param_bytes": True}], [], "node 'a' field 'param_bytes': must be a number"),
        ([{"id": "a", "is_backward": 1}], [], "node 'a' field 'is_backward': must be true or false"),
        ([{"id": "a", "name": 3}], [], "node 'a' field 'name': must be a string"),
        ([{"id": "a", "colocation_group": 3}], [], "node 'a' field 'colocation_group': must be a string or null"),
        ([{"id": "a", "allowed_kinds": "gpu"}], [], "node 'a' field 'allowed_kinds': must be a JSON array"),
        ([{"id": "a", "allowed_kinds": []}], [], "node 'a' field 'allowed_kinds': must list at least one"),
        ([{"id": "a", "time_by_kind": {"cpu": "x"}}], [], "node 'a' field 'time_by_kind['cpu']': must be a number"),
        ([{"id": "a", "time_by_kind": [1]}], [], "node 'a' field 'time_by_kind': must be a JSON object"),
        (
            [{"id": "a"}, {"id": "b"}],
            [{"source": "a", "target": "b", "bytes": "8"}],
            "edge 0 ('a' -> 'b') field 'bytes': must be a number",
        ),
        (
            [{"id": "a"}, {"id": "b"}],
            [{"source": "a", "target": "b", "transfer_time": -2}],
            "edge 0 ('a' -> 'b') field 'transfer_time': must not be negative",
        ),
        (["a"], [], "nodes[0]: must be a JSON object, got 'a'"),
        ([{"id": "a"}], ["a->b"], "edges[0]: must be a JSON object"),
    ],
)
def test_bad_graph_names_node_and_field(tmp_path: Path, nodes: list, edges: list, expected: str) -> None:
    path = _write(tmp_path, _native(nodes, edges))
    assert f"{path}: {expected}" in _message(path)


def test_mistyped_field_message_is_exact(tmp_path: Path) -> None:
    path = _write(tmp_path, _native([{"id": "conv1", "forward_time": "abc"}]))
    assert _message(path) == f"{path}: node 'conv1' field 'forward_time': must be a number, got 'abc'"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", ["forward_time", "backward_time", "flops", "activation_bytes"])
def test_nan_and_infinity_literals(tmp_path: Path, literal: str, field: str) -> None:
    text = '{"format": "%s", "nodes": [{"id": "conv1", "%s": %s}]}' % (FORMAT, field, literal)  # noqa: UP031
    path = _write(tmp_path, text)
    message = _message(path)
    assert f"node 'conv1' field '{field}': must be a finite number" in message


def test_nan_in_time_by_kind_and_edge(tmp_path: Path) -> None:
    text = '{"format": "' + FORMAT + '", "nodes": [{"id": "a", "time_by_kind": {"cpu": NaN}}, {"id": "b"}],'
    text += ' "edges": [{"source": "a", "target": "b", "transfer_time": Infinity}]}'
    assert "node 'a' field 'time_by_kind['cpu']': must be a finite number" in _message(_write(tmp_path, text))
    text = text.replace("NaN", "1.0")
    assert "edge 0 ('a' -> 'b') field 'transfer_time': must be a finite" in _message(_write(tmp_path, text))


def test_nan_in_tarnawski_and_nodelink(tmp_path: Path) -> None:
    text = '{"maxSizePerFPGA": 10, "maxFPGAs": 1, "maxCPUs": 0, "edges": [], "nodes": [{"id": 7, "cpuLatency": 1,'
    text += ' "fpgaLatency": NaN, "size": 0}]}'
    assert "node '7' field 'fpgaLatency': must be a finite number" in _message(_write(tmp_path, text))
    text = '{"directed": true, "nodes": [{"id": "a", "forward_time": Infinity}], "edges": []}'
    assert "node 'a' field 'forward_time': must be a finite number" in _message(_write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    message = _message(tmp_path / "nope.json")
    assert "no such file" in message


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in _message(tmp_path)
    with pytest.raises(InputError, match="is a directory"):
        read_cluster(tmp_path)


def test_truncated_json_gives_line_and_column(tmp_path: Path) -> None:
    text = _native([{"id": "a"}, {"id": "b"}]).replace("}, {", "},\n{")
    path = _write(tmp_path, text[:-10])
    message = _message(path)
    assert "invalid JSON at line 2 column" in message
    assert "truncated" in message


def test_invalid_json_in_the_middle(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"format": "milp-partition/1",\n "nodes": [{"id": "a",}]}')
    message = _message(path)
    assert "invalid JSON at line 2 column 23" in message
    assert "fix the JSON syntax" in message


def test_every_truncation_of_a_file_is_an_input_error(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "tiny.json").read_text()
    for cut in range(1, len(text) - 2, 97):
        path = _write(tmp_path, text[:cut])
        with pytest.raises(InputError):
            read_instance(path)


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
@pytest.mark.parametrize("fmt", ["auto", "native", "tarnawski", "nodelink", "pipedream"])
def test_empty_file(tmp_path: Path, text: str, fmt: str) -> None:
    assert "the file is empty" in _message(_write(tmp_path, text), fmt=fmt)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"foo": 1, "bar": []}', "unknown format (top-level keys: foo, bar)"),
        ("[1, 2, 3]", "JSON list, not an object"),
        ("a,b,c\n1,2,3\n", "unknown format (the file starts with 'a,b,c')"),
    ],
)
def test_unknown_format(tmp_path: Path, text: str, expected: str) -> None:
    message = _message(_write(tmp_path, text))
    assert expected in message
    assert "PipeDream" in message


def test_strategy_tables_given_as_a_graph(tmp_path: Path) -> None:
    message = _message(_write(tmp_path, '{"format": "strategy-tables/1", "nodes": []}'))
    assert "this is a strategy-tables file" in message and "--problem strategy" in message


def test_unknown_format_name(tmp_path: Path) -> None:
    path = _write(tmp_path, _native([{"id": "a"}]))
    assert "unknown format name 'xml'" in _message(path, fmt="xml")


def test_benchmark_license_is_not_a_graph() -> None:
    assert "unknown format" in _message(BENCH / "pipedream" / "LICENSE-pipedream.txt")


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path, ('{"format": "%s", "nodes": [{"id": "caf\u00e9"}]}' % FORMAT).encode("latin-1"))  # noqa: UP031
    message = _message(path)
    assert "is not UTF-8" in message
    assert "save the file as UTF-8" in message


def test_utf8_with_bom_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, b"\xef\xbb\xbf" + _native([{"id": "caf\u00e9"}]).encode("utf-8"))
    assert read_instance(path).graph.nodes[0].id == "caf\u00e9"


def test_huge_integer_literal(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"format": "%s", "nodes": [{"id": "a", "param_bytes": %s}]}' % (FORMAT, "9" * 5000))  # noqa: UP031
    assert "invalid JSON" in _message(path)


def test_top_level_types(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"format": FORMAT, "nodes": {"a": {}}}))
    assert "field 'nodes': must be a JSON array" in _message(path)
    path = _write(tmp_path, json.dumps({"format": FORMAT}))
    assert "top level: missing required field 'nodes'" in _message(path)


def test_cluster_file_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"format": "milp-partition-cluster/1", "devices": [', "cluster.json")
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        read_cluster(path)
    path = _write(tmp_path, '{"format": "milp-partition-cluster/9", "devices": []}', "cluster.json")
    with pytest.raises(InputError, match="format version 'milp-partition-cluster/9' is not supported"):
        read_cluster(path)
    with pytest.raises(InputError, match="no such file"):
        read_cluster(tmp_path / "missing.json")


_WRONG_VALUES = ["abc", -1, 1.5, None, True, [], {}, float("nan")]


@pytest.mark.parametrize("value", _WRONG_VALUES, ids=repr)
def test_no_raw_exception_escapes(tmp_path: Path, value: object) -> None:
    """Any wrong value in any field of any format gives InputError or a valid graph, never another exception."""
    tiny = json.loads((ROOT / "examples" / "tiny.json").read_text())
    tarnawski = json.loads((BENCH / "pipeline" / "LayerGraphs" / "bert24_inference.json").read_text())
    cases: list[dict] = []
    for data, node_key, edge_key in ((tiny, "nodes", "edges"), (tarnawski, "nodes", "edges")):
        for section in (node_key, edge_key):
            for field in data[section][1]:
                changed = json.loads(json.dumps(data))
                changed[section][1][field] = value
                cases.append(changed)
        for field in data:
            if field not in (node_key, edge_key):
                changed = json.loads(json.dumps(data))
                changed[field] = value
                cases.append(changed)
    for i, case in enumerate(cases):
        path = _write(tmp_path, json.dumps(case), f"case{i}.json")
        try:
            read_instance(path)
        except InputError as err:
            assert str(err).startswith(str(path))
