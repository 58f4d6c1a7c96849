"""Reading PipeDream ``graph.txt`` profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from milp_partition.errors import CycleError, InputError
from milp_partition.io import detect_format, read_instance
from milp_partition.io.pipedream import parse_pipedream, read_pipedream

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
FILES = sorted(p for p in (BENCH / "pipedream").glob("*.txt") if not p.name.startswith("LICENSE"))


def _raw_value(text: str) -> float:
    """An independent reading of a metric value (a number or ``[a; b; c]``)."""
    return sum(float(x) for x in text.strip("[]").split(";"))


def _raw_profile(path: Path) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str]] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        if line[0] in " \t":
            a, b = line.strip().split(" -- ")
            edges.append((a, b))
        else:
            tokens = line.split(" -- ")
            metrics = dict(item.split("=", 1) for item in tokens[-1].split(", "))
            nodes[tokens[0]] = {"desc": " -- ".join(tokens[1:-1]), **metrics}
    return nodes, edges


def test_all_six_files_found() -> None:
    assert [p.stem for p in FILES] == ["alexnet", "gnmt", "resnet18", "resnet50", "squeezenet1_0", "vgg16"]


@pytest.fixture(params=FILES, ids=lambda p: p.stem)
def bench(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_counts(bench: Path) -> None:
    raw_nodes, raw_edges = _raw_profile(bench)
    inst = read_instance(bench)
    assert detect_format(bench) == "pipedream"
    assert len(inst.graph.nodes) == len(raw_nodes)
    assert len(inst.graph.edges) == len(raw_edges)
    assert inst.cluster is None
    assert inst.graph.time_unit == "ms"
    assert inst.graph.name == bench.stem


def test_mapping(bench: Path) -> None:
    raw_nodes, raw_edges = _raw_profile(bench)
    graph = read_pipedream(bench).graph
    assert [n.id for n in graph.nodes] == list(raw_nodes)
    for node in graph.nodes:
        raw = raw_nodes[node.id]
        assert node.name == raw["desc"]
        assert node.op_type == raw["desc"].split("(")[0]
        assert node.forward_time == float(raw["forward_compute_time"])
        assert node.backward_time == float(raw["backward_compute_time"])
        assert node.activation_bytes == round(_raw_value(raw["activation_size"]))
        assert node.param_bytes == round(float(raw["parameter_size"]))
        assert not node.is_backward and node.allowed_kinds is None
    for (a, b), edge in zip(raw_edges, graph.edges, strict=True):
        assert (edge.source, edge.target) == (a, b)
        assert edge.bytes == round(_raw_value(raw_nodes[a]["activation_size"]))
        assert edge.transfer_time is None


def test_list_activation_is_summed() -> None:
    graph = read_pipedream(BENCH / "pipedream" / "gnmt.txt").graph
    assert graph.node("node7").activation_bytes == 6291456 + 131072 + 131072
    assert graph.node("node7").op_type == "LSTM"


NODE = (
    "node{k} -- Linear(in_features=4, out_features=4) -- forward_compute_time={f}, backward_compute_time=0.5, "
    "activation_size=64.000, parameter_size=80.000"
)


def _profile(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_space_indented_edges_crlf_and_stage_id(tmp_path: Path) -> None:
    text = _profile(NODE.format(k=1, f=1.0) + " -- stage_id=0", NODE.format(k=2, f=2.0), "    node1 -- node2")
    path = tmp_path / "graph.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    graph = read_instance(path).graph
    assert [n.forward_time for n in graph.nodes] == [1.0, 2.0]
    assert graph.edges[0].bytes == 64
    assert graph.nodes[0].name == "Linear(in_features=4, out_features=4)"


def test_description_with_separator() -> None:
    line = "node1 -- Seq(a -- b) -- forward_compute_time=1, backward_compute_time=0, activation_size=8, parameter_size=0"
    graph = parse_pipedream(line, "g.txt")
    assert graph.nodes[0].name == "Seq(a -- b)"


@pytest.mark.parametrize(
    ("lines", "line", "expected"),
    [
        ((NODE.format(k=1, f="abc"),), 1, "node 'node1' field 'forward_compute_time': must be a number, got 'abc'"),
        ((NODE.format(k=1, f=1), NODE.format(k=2, f="nan")), 2, "field 'forward_compute_time': must be a finite"),
        ((NODE.format(k=1, f=1), NODE.format(k=2, f="-1")), 2, "must not be negative"),
        ((NODE.format(k=1, f=1), "node2 -- Foo -- forward_compute_time=1"), 2, "missing backward_compute_time"),
        ((NODE.format(k=1, f=1), "node2 -- Foo"), 2, "edge line must start with a tab"),
        ((NODE.format(k=1, f=1), "node2 Foo"), 2, "malformed node line"),
        ((NODE.format(k=1, f=1), "\tnode1 -- node9"), 2, "unknown node 'node9'"),
        ((NODE.format(k=1, f=1), "\tnode1"), 2, "malformed edge line"),
        ((NODE.format(k=1, f=1), NODE.format(k=1, f=2)), 2, "duplicate node id 'node1' (first on line 1)"),
        ((NODE.format(k=1, f=1), NODE.format(k=2, f=1), "\tnode1 -- node2", "\tnode1 -- node2"), 4, "duplicate edge"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, lines: tuple[str, ...], line: int, expected: str) -> None:
    path = tmp_path / "graph.txt"
    path.write_text(_profile(*lines))
    with pytest.raises(InputError) as err:
        read_instance(path, fmt="pipedream")
    message = str(err.value)
    assert message.startswith(f"{path}: line {line}")
    assert expected in message


def test_cycle(tmp_path: Path) -> None:
    path = tmp_path / "graph.txt"
    path.write_text(_profile(NODE.format(k=1, f=1), NODE.format(k=2, f=1), "\tnode1 -- node2", "\tnode2 -- node1"))
    with pytest.raises(CycleError) as err:
        read_instance(path)
    assert str(path) in str(err.value)
    assert "node1 -> node2 -> node1" in str(err.value)


def test_no_node_lines(tmp_path: Path) -> None:
    path = tmp_path / "graph.txt"
    path.write_text("\tnode1 -- node2\n")
    with pytest.raises(InputError, match="no node line found"):
        read_instance(path, fmt="pipedream")
