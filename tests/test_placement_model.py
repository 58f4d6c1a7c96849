"""Placement inputs: bad files give one clear line naming file and task (reader and CLI); conversions; CLI commands."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from milp_partition.cli.dispatch import main
from milp_partition.cluster import Device, Link, homogeneous_cluster, make_cluster
from milp_partition.errors import CycleError, InputError
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.io import read_instance
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.placement.convert import BACKWARD_SUFFIX, placement_from_graph
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
EXAMPLE = SHARED / "placement" / "example-1.json"


def _instance() -> dict:
    return json.loads(EXAMPLE.read_text())


BAD = {
    "comm of the wrong size": (lambda d: d["edges"][3].__setitem__("comm", [[0, 1], [1, 0]]), "3 x 3", "edge 3"),
    "no device can hold a task": (lambda d: d["tasks"][5].__setitem__("memory", 99), "no device can run it", "needs memory 99"),
    "a cycle": (
        lambda d: d["edges"].append({"source": d["tasks"][-1]["id"], "target": "1", "comm": [[0] * 3] * 3}),
        "cycle",
        None,
    ),
    "unknown task id": (lambda d: d["edges"][0].__setitem__("target", "nope"), "unknown task id 'nope'", "edge 0"),
    "NaN time": (lambda d: d["tasks"][2].__setitem__("time", [float("nan"), 1, 1]), "finite number", "task '2'"),
    "wrong number of times": (lambda d: d["tasks"][2].__setitem__("time", [1, 1]), "one time per device", "task '2'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_inputs_reader_and_cli(case, tmp_path, capsys) -> None:
    mutate, message, where = BAD[case]
    data = _instance()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        read_placement_instance(path)
    text = str(info.value)
    assert str(path) in text and message in text
    if where:
        assert where in text
    if case == "a cycle":
        assert isinstance(info.value, CycleError)
    code = main(["solve", str(path), "--solver", "none", "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err and message in err


def test_cli_solve_info_evaluate(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    assert main(["solve", str(EXAMPLE), "--time-limit", "30", "--output", str(out), "--progress", "0"]) == 0
    text = capsys.readouterr().out
    assert "OPTIMAL" in text and "makespan = 30" in text
    result = json.loads(out.read_text())
    assert result["problem"] == "placement" and result["status"] == "optimal" and result["objective"] == 30
    assert set(result["starts"]) == set(result["assignment"]) and len(result["starts"]) == 14
    assert main(["evaluate", str(EXAMPLE), str(out)]) == 0
    assert "makespan = 30" in capsys.readouterr().out
    # a schedule that overlaps: exit 3 and the violation listed
    result["starts"] = {t: 0.0 for t in result["starts"]}
    out.write_text(json.dumps(result))
    assert main(["evaluate", str(EXAMPLE), str(out)]) == 3
    assert "overlap" in capsys.readouterr().out
    assert main(["info", str(EXAMPLE)]) == 0
    assert "14 tasks" in capsys.readouterr().out
    assert main(["solve", str(EXAMPLE), "--problem", "placement", "--solver", "none", "--heuristic", "heft", "-q"]) == 0
    assert main(["solve", str(EXAMPLE), "--memory-model", "1f1b", "-q"]) == 2


def test_native_graph_and_cluster_conversion() -> None:
    nodes = [
        Node("a", forward_time=2.0, param_bytes=10, time_by_kind={"cpu": 20.0}),
        Node("b", forward_time=3.0, param_bytes=20, allowed_kinds=("gpu",)),
        Node("c", forward_time=1.0, param_bytes=5),
    ]
    graph = make_graph(
        nodes, [Edge("a", "b", bytes=1000), Edge("a", "c", bytes=2000), Edge("b", "c", transfer_time=0.5)], time_unit="ms"
    )
    cluster = make_cluster([Device("g0", "gpu", 100), Device("g1", "gpu", 100)], host_cpu_cores=1, link=Link(1e-3, 1e6))
    p = placement_from_graph(graph, cluster)
    assert p.device_ids == ("g0", "g1", "cpu0")
    assert p.time[0].tolist() == [2.0, 2.0, 20.0] and math.isinf(p.time[1, 2])
    assert p.comm[0, 0, 1] == pytest.approx(1.0 + 1.0)  # 1 ms latency + 1000 B / 1 MB/s = 1 ms
    assert p.comm[1, 1, 0] == pytest.approx(3.0) and p.comm[2, 0, 1] == 0.5 and p.comm[0, 1, 1] == 0
    assert p.task_memory.tolist() == [10, 20, 5]
    r = solve_placement(p, PlacementSolveSettings(time_limit_s=10, threads=1))
    assert r.status == "optimal" and r.objective == pytest.approx(6.0)  # all on one GPU: 2 + 3 + 1


def test_pipedream_training_step() -> None:
    inst = read_instance(SHARED / "pipedream" / "alexnet.txt")
    g = inst.graph
    cluster = homogeneous_cluster(2, 16 * 2**30, link=Link(1e-5, 12e9))
    p = placement_from_graph(g, cluster)
    n = len(g.nodes)
    assert p.num_tasks == 2 * n and p.num_edges == 2 * len(g.edges) + n
    i, j = p.task_index[g.nodes[1].id], p.task_index[g.nodes[1].id + BACKWARD_SUFFIX]
    assert p.time[i, 0] == g.nodes[1].forward_time and p.time[j, 0] == g.nodes[1].backward_time
    assert p.colocation[i] == p.colocation[j] >= 0  # backward with its forward task
    e = next(k for k in range(p.num_edges) if p.task_ids[p.edge_source[k]] == g.edges[0].target + BACKWARD_SUFFIX)
    assert p.task_ids[p.edge_target[e]] == g.edges[0].source + BACKWARD_SUFFIX
    free = placement_from_graph(g, cluster, colocate_backward=False)
    assert (free.colocation < 0).all()
    r = solve_placement(p, PlacementSolveSettings(time_limit_s=20, threads=1))
    total = sum(nd.forward_time + nd.backward_time for nd in g.nodes)
    assert r.status in ("optimal", "feasible") and r.objective <= total + 1e-9
    assert np.isclose(r.objective, total) or r.objective < total
