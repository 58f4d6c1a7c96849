"""Reading joint-problem files: Piper's JSON (the shared instances), the native format, and every bad-input case."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from milp_partition.cli import main
from milp_partition.errors import InputError
from milp_partition.io.piper import joint_from_dict, joint_to_dict, looks_like_joint, read_joint, write_joint
from milp_partition.joint.generators import repeat_block
from milp_partition.result import Status

JOINT = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "joint"
GIB = 2**30

needs_shared = pytest.mark.skipif(not JOINT.is_dir(), reason="../shared/benchmarks/joint not present")


def tiny() -> dict:
    """Two nodes a -> b in Piper's format."""

    def cfg(name, p, fw, bw):
        return {
            "id": name,
            "timePerSample": p,
            "parameterSize": 8.0,
            "memoryUsageA": 2.0,
            "memoryUsageB": 1.0,
            "syncTimeFw": fw,
            "syncTimeBw": bw,
        }

    return {
        "maxMemoryPerDevice": 100.0,
        "maxDevices": 2,
        "bandwidth": 10.0,
        "mbsInBatch": 4,
        "nodes": [
            {"id": 0, "name": "a", "TMPCs": {"1": [cfg("vanilla", 1.0, {}, {"1": 0.0})]}},
            {
                "id": 1,
                "name": "b",
                "TMPCs": {"1": [cfg("vanilla", 2.0, {"0": 0.0}, {}), cfg("activation recomp", 3.0, {"0": 0.0}, {})]},
            },
        ],
        "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 5.0}],
    }


@needs_shared
@pytest.mark.parametrize(
    ("name", "nodes", "edges", "degrees"),
    [("bert32a100.json", 37, 67, (1, 2, 4, 8)), ("gnmt.json", 78, 104, (1,)), ("resnet.json", 177, 193, (1,))],
)
def test_reads_piper_files(name: str, nodes: int, edges: int, degrees: tuple[int, ...]) -> None:
    p = read_joint(JOINT / name, devices=8, memory_bytes=8 * GIB, bandwidth_bytes_per_s=25 * GIB)
    assert (len(p.nodes), len(p.edges), p.degrees) == (nodes, edges, degrees)
    assert p.cluster.device_count == 8 and p.memory_bytes == 8 * GIB
    assert p.microbatches == json.loads((JOINT / name).read_text())["mbsInBatch"]
    assert all(1 <= len(cs) <= 2 for n in p.nodes for cs in n.configs.values())


def test_native_round_trip(tmp_path: Path) -> None:
    p = joint_from_dict(tiny(), "tiny")
    path = tmp_path / "j.json"
    write_joint(p, path)
    assert looks_like_joint(json.loads(path.read_text()))
    q = read_joint(path)
    assert q.nodes == p.nodes and q.edges == p.edges and q.cluster == p.cluster


@needs_shared
def test_repeat_block_keeps_32_and_grows() -> None:
    p = read_joint(JOINT / "bert32a100.json", devices=8, memory_bytes=8 * GIB, bandwidth_bytes_per_s=25 * GIB)
    for layers in (32, 64, 96):
        q = repeat_block(p, layers)
        assert len(q.nodes) == 37 - 32 + layers and len(q.edges) == 67 + 2 * (layers - 32)
        assert joint_from_dict(joint_to_dict(q), "x").nodes == q.nodes  # sync maps name real neighbours, no cycle
    same = repeat_block(p, 32)
    assert sorted(e.bytes for e in same.edges) == sorted(e.bytes for e in p.edges)


def _bad(mutate) -> str:
    data = copy.deepcopy(tiny())
    mutate(data)
    with pytest.raises(InputError) as err:
        joint_from_dict(data, "bad.json")
    msg = str(err.value)
    assert msg.startswith("bad.json") and "\n" not in msg
    return msg


def test_node_without_configurations_for_a_degree() -> None:
    def m(d):
        d["nodes"][0]["TMPCs"]["2"] = copy.deepcopy(d["nodes"][0]["TMPCs"]["1"])

    assert "same tensor-parallel degrees" in _bad(m)


def test_empty_configuration_list() -> None:
    assert "non-empty list" in _bad(lambda d: d["nodes"][1]["TMPCs"].update({"1": []}))


def test_unknown_id_in_sync_maps() -> None:
    msg = _bad(lambda d: d["nodes"][1]["TMPCs"]["1"][0]["syncTimeFw"].update({"7": 1.0}))
    assert "node 1" in msg and "syncTimeFw" in msg and "'7'" in msg


def test_unknown_edge_endpoint() -> None:
    assert "unknown node id '9'" in _bad(lambda d: d["edges"].append({"sourceId": 9, "destId": 1, "communicationCost": 1.0}))


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf, "3"])
def test_negative_nan_or_non_numbers(value) -> None:
    msg = _bad(lambda d: d["nodes"][0]["TMPCs"]["1"][0].update({"memoryUsageA": value}))
    assert "memoryUsageA" in msg and "node 0" in msg


def test_negative_edge_bytes() -> None:
    assert "communicationCost" in _bad(lambda d: d["edges"][0].update({"communicationCost": -2}))


def test_cycle() -> None:
    def m(d):
        d["edges"].append({"sourceId": 1, "destId": 0, "communicationCost": 1.0})
        d["nodes"][0]["TMPCs"]["1"][0]["syncTimeFw"] = {"1": 0.0}
        d["nodes"][1]["TMPCs"]["1"][0]["syncTimeBw"] = {"0": 0.0}
        d["nodes"][1]["TMPCs"]["1"][1]["syncTimeBw"] = {"0": 0.0}

    assert "cycle" in _bad(m)


@pytest.mark.parametrize("value", [0, -3, 2.5, "4", None])
def test_microbatches_not_a_positive_integer(value) -> None:
    msg = _bad(lambda d: d.update({"mbsInBatch": value}))
    assert "microbatches" in msg


def test_duplicate_node_id() -> None:
    assert "duplicate node id" in _bad(lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][0])))


def test_missing_field() -> None:
    assert "missing field 'timePerSample'" in _bad(lambda d: d["nodes"][0]["TMPCs"]["1"][0].pop("timePerSample"))


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    data = tiny()
    data["nodes"][1]["TMPCs"]["1"][0]["syncTimeBw"] = {"5": 1.0}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err and "syncTimeBw" in err and "Traceback" not in err


def test_cli_microbatches_flag_checked(tmp_path: Path, capsys) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tiny()))
    with pytest.raises(SystemExit) as exit_:  # refused by the parser, before the file is read
        main(["solve", str(path), "--microbatches", "0"])
    assert exit_.value.code == 2
    assert "--microbatches" in capsys.readouterr().err


def test_duplicate_edge_is_refused_in_both_formats(tmp_path: Path, capsys) -> None:
    """Issue 20 item 1: a repeated edge ended the search at once (UNKNOWN) or 'proved' a bound above the optimum."""
    msg = _bad(lambda d: d["edges"].append(dict(d["edges"][0])))
    assert "duplicate edge 0 -> 1" in msg and "edges[1]" in msg and "edges[0]" in msg
    native = joint_to_dict(joint_from_dict(tiny(), "t"))
    native["edges"].append(dict(native["edges"][0]))
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(native))
    assert main(["solve", str(path), "--progress", "0"]) == 2
    err = capsys.readouterr().err
    assert "duplicate edge 0 -> 1" in err and len(err.strip().splitlines()) == 1


def test_dp_reaches_the_whole_graph_with_a_repeated_predecessor() -> None:
    """The root cause of the false bound: the DP's predecessor masks summed 1 << u, so a repeated predecessor
    set the next node's bit; the last ideal was then not the whole graph and the 'exhaustive' search proved a
    value of a part of it.  Masks are ORed now, and a last ideal short of the whole graph is an error."""
    from dataclasses import replace

    from milp_partition.joint.dp import joint_data, search
    from milp_partition.verifiers.joint import verify_joint

    p = joint_from_dict(tiny(), "t")
    dup = replace(p, edges=(*p.edges, p.edges[0]))  # past the reader, which refuses it
    data = joint_data(dup)
    assert data.ideals[-1] == (1 << len(dup.nodes)) - 1
    found = search(data)
    assert found.optimal and found.plan is not None
    rep = verify_joint(dup, found.plan)
    assert rep.feasible and rep.objective == pytest.approx(found.value)


def test_an_exact_method_whose_plan_is_rejected_proves_nothing(monkeypatch) -> None:
    """A bound (or infeasibility) from an exact method whose own answer fails the verifier is dropped, with a note."""
    from milp_partition.joint import solve as joint_solve
    from milp_partition.joint.dp import SearchResult
    from milp_partition.joint.problem import JointPlan, JointSolveSettings, JointStage

    bogus = JointPlan((JointStage(("0",), 1, 1, {"0": "vanilla"}),))  # node 1 in no stage

    def lying_search(*args, **kwargs):
        return SearchResult(bogus, 1.0, 2.29, True, False, 1, 0.0)  # a bound the verified 2.3 does not contradict

    monkeypatch.setattr(joint_solve, "search", lying_search)
    r = joint_solve.solve_joint(joint_from_dict(tiny(), "t"), JointSolveSettings(time_limit_s=10))
    assert r.bound is None  # nothing else proves a bound here; 2.29 must not be kept
    assert any("joint-dp" in d and "rejected" in d for d in r.discarded)
    assert r.status is not Status.OPTIMAL or r.objective == pytest.approx(2.3)


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda d: d["nodes"][0]["TMPCs"]["1"][0].update(timePerSampel=1.0), "did you mean 'timePerSample'"),
        (lambda d: d["edges"][0].update(comunicationCost=1.0), "did you mean 'communicationCost'"),
        (lambda d: d["nodes"][0].update(nmae="x"), "did you mean 'name'"),
        (lambda d: d.update(maxDevice=4), "did you mean 'maxDevices'"),
    ],
)
def test_misspelt_piper_fields_are_refused(mutate, named: str) -> None:
    """Issue 20 item 4: a misspelt field was ignored (its default used)."""
    assert named in _bad(mutate)


def test_misspelt_native_fields_are_refused() -> None:
    native = joint_to_dict(joint_from_dict(tiny(), "t"))
    for mutate, named in (
        (lambda d: d["cluster"].update(device=4), "did you mean 'devices'"),
        (lambda d: d["edges"][0].update(bytse=1.0), "did you mean 'bytes'"),
        (lambda d: d["nodes"][1]["configs"]["1"][0].update(sync_fw_byte={}), "did you mean 'sync_fw_bytes'"),
        (lambda d: d.update(clusters={}), "did you mean 'cluster'"),
    ):
        data = copy.deepcopy(native)
        mutate(data)
        with pytest.raises(InputError, match=named):
            joint_from_dict(data, "native.json")


def test_a_degree_written_twice_is_refused() -> None:
    """' 1' beside '1' read as the same degree: one list silently replaced the other."""

    def mutate(d):
        d["nodes"][0]["TMPCs"][" 1"] = copy.deepcopy(d["nodes"][0]["TMPCs"]["1"])

    assert "written plainly" in _bad(mutate)


@pytest.mark.parametrize("value", [None, True, "", 1.5, {}])
def test_a_configuration_id_must_be_a_string(value) -> None:
    """A null id became the configuration 'None'."""
    assert "configuration id" in _bad(lambda d: d["nodes"][0]["TMPCs"]["1"][0].update(id=value))


def test_info_refuses_non_finite_cluster_values(tmp_path: Path, capsys) -> None:
    """info printed NaN cluster values as they were."""
    path = tmp_path / "nan.json"
    path.write_text(
        json.dumps(tiny()).replace('"maxDevices": 2', '"maxDevices": NaN').replace('"bandwidth": 10.0', '"bandwidth": NaN')
    )
    assert main(["info", str(path)]) == 2
    assert "devices" in capsys.readouterr().err
    path.write_text(json.dumps(tiny()))
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cluster     in the file: 2 devices, 100 B each, bandwidth 10 B/s, N = 4" in out
