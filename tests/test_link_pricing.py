"""A link given on the command line prices an imported graph's transfers (issue 43 item 3).

An imported graph carries each edge's bytes and the transfer time priced at import; ``--bandwidth 1Gb/s`` and
``400Gb/s`` gave the same optimum while the report printed the new rate.  The expected optima are brute force over
every assignment, scored by the independent verifier with the edges priced from bytes and the link.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from brute_force import brute_force_pipeline

from milp_partition.cli.dispatch import main
from milp_partition.cluster import Link, homogeneous_cluster
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings

TIMES = [4.0, 3.0, 5.0, 2.0, 4.0, 3.0]
EDGE_BYTES = 2_000_000_000


def _imported(path: Path, *, edge_bytes: int = EDGE_BYTES) -> Path:
    """A chain as an import writes it: every edge with its bytes and a transfer time (0.5 s) priced at import."""
    nodes = [{"id": f"l{i}", "forward_time": t, "param_bytes": 1000} for i, t in enumerate(TIMES)]
    edges = [{"source": f"l{i}", "target": f"l{i + 1}", "bytes": edge_bytes, "transfer_time": 0.5} for i in range(5)]
    path.write_text(
        json.dumps({"format": "milp-partition/1", "name": "imported", "time_unit": "s", "nodes": nodes, "edges": edges})
    )
    return path


def _brute_force(bandwidth_bytes_per_s: float, transfer_time: float | None = None) -> float:
    nodes = [Node(id=f"l{i}", forward_time=t, param_bytes=1000) for i, t in enumerate(TIMES)]
    edges = [Edge(f"l{i}", f"l{i + 1}", bytes=EDGE_BYTES, transfer_time=transfer_time) for i in range(5)]
    graph = make_graph(nodes, edges, name="imported", time_unit="s")
    cluster = homogeneous_cluster(3, None, link=Link(latency_s=0.0, bandwidth_bytes_per_s=bandwidth_bytes_per_s))
    return brute_force_pipeline(PipelineProblem(graph, cluster, PipelineSettings()))


@pytest.mark.parametrize(("rate", "bytes_per_s"), [("1Gb/s", 1.25e8), ("400Gb/s", 5e10)])
def test_the_bandwidth_flag_prices_an_imported_graphs_transfers(tmp_path, capsys, rate: str, bytes_per_s: float) -> None:
    graph = _imported(tmp_path / "g.json")
    out = tmp_path / "r.json"
    code = main(["solve", str(graph), "--devices", "3", "--bandwidth", rate, "--quiet", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["status"] == "optimal"
    assert result["objective"] == pytest.approx(_brute_force(bytes_per_s), rel=1e-9)


def test_without_a_link_flag_the_files_transfer_times_stand(tmp_path, capsys) -> None:
    graph = _imported(tmp_path / "g.json")
    out = tmp_path / "r.json"
    assert main(["solve", str(graph), "--devices", "3", "--quiet", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["objective"] == pytest.approx(_brute_force(1.0, transfer_time=0.5), rel=1e-9)


def test_an_edge_a_link_cannot_price_refuses_the_flag(tmp_path, capsys) -> None:
    graph = _imported(tmp_path / "g.json", edge_bytes=0)
    code = main(["solve", str(graph), "--devices", "3", "--bandwidth", "1Gb/s", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "--bandwidth" in err and "no bytes" in err and "g.json" in err


@pytest.mark.parametrize("flags", [["--bandwidth", "1Gb/s"], []])
def test_evaluate_reads_the_cluster_the_result_was_solved_for(tmp_path, capsys, flags: list[str]) -> None:
    """Issue 43 item 15: ``evaluate GRAPH RESULT`` asked for ``--devices --memory --bandwidth`` again though the plan
    was solved for them; the result records its cluster (and whether its transfers were priced by the link), and
    evaluate without flags re-checks the plan as it was solved, claims included."""
    graph = _imported(tmp_path / "g.json")
    out = tmp_path / "r.json"
    assert main(["solve", str(graph), "--devices", "3", "--memory", "1MiB", *flags, "--quiet", "--output", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(graph), str(out)]) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "instance.cluster" in text and "feasible;" in text
    # the recorded cluster is what evaluate checks against: shrink its memory and the plan no longer fits
    data = json.loads(out.read_text())
    for d in data["instance"]["cluster"]["devices"]:
        d["memory_bytes"] = 10
    out.write_text(json.dumps(data))
    assert main(["evaluate", str(graph), str(out)]) == 3
    data["instance"]["cluster"]["devices"] = "x"
    out.write_text(json.dumps(data))
    assert main(["evaluate", str(graph), str(out)]) == 2
    assert "instance.cluster" in capsys.readouterr().err
