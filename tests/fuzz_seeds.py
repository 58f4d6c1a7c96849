"""Seed files of every input format and the command lines that read them, for the fuzz test."""

from __future__ import annotations

import json
from pathlib import Path

from milp_partition.calibration.profile import datasheet_profile, write_profile
from milp_partition.cli.dispatch import main
from milp_partition.io import read_instance, write_instance
from milp_partition.io.native import write_cluster
from milp_partition.io.piper import joint_from_dict, joint_to_dict

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "benchmarks"
QUICK = ["--solver", "none", "-q", "--progress", "0", "--time-limit", "10"]


def make_seeds(folder: Path) -> dict[str, tuple[Path, list[list[str]]]]:
    """Format name -> (seed file, command lines with ``{}`` where the file goes)."""
    folder.mkdir(parents=True, exist_ok=True)
    tiny = REPO / "examples" / "tiny.json"
    inst = read_instance(tiny)
    nodelink = folder / "tiny_nodelink.json"
    write_instance(inst, nodelink, "nodelink")
    cluster = folder / "cluster.json"
    write_cluster(inst.cluster, cluster)
    profile = folder / "profile.json"
    write_profile(datasheet_profile("H100"), profile)
    tarnawski = SHARED / "pipeline" / "LayerGraphs" / "bert24_inference.json"
    tables = SHARED / "strategy" / "alexnet_p4.json"
    layers = REPO / "examples" / "gpt4_layers.json"
    placement = SHARED / "placement" / "example-1.json"
    results = {}
    for name, instance, extra in (
        ("pipeline", tiny, []),
        ("strategy", tables, []),
        ("placement", placement, []),
    ):
        out = folder / f"result_{name}.json"
        rc = main(["solve", str(instance), "-o", str(out), "-q", "--progress", "0", *extra])
        assert rc == 0, name
        results[name] = (instance, out)
    bare = json.loads(tiny.read_text())
    bare.pop("cluster", None)
    piper = folder / "joint_piper.json"
    piper.write_text(json.dumps(_tiny_piper()))
    native_joint = folder / "joint_native.json"
    native_joint.write_text(json.dumps(joint_to_dict(joint_from_dict(_tiny_piper(), "tiny"))))
    joint_result = folder / "result_joint.json"
    assert main(["solve", str(piper), "-o", str(joint_result), "-q", "--progress", "0"]) == 0
    return {
        "joint-piper": (piper, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "joint-native": (native_joint, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "result-joint": (joint_result, [["evaluate", str(piper), "{}"]]),
        "native": (tiny, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "tarnawski": (tarnawski, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "pipedream": (SHARED / "pipedream" / "alexnet.txt", [["solve", "{}", "--devices", "2", *QUICK], ["info", "{}"]]),
        "node-link": (nodelink, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "cluster": (cluster, [["solve", str(tiny), "--cluster", "{}", *QUICK]]),
        "profile": (profile, [["solve", str(layers), "--devices", "4", "--profile", "{}", *QUICK]]),
        "strategy-tables": (tables, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "strategy-layers": (layers, [["solve", "{}", "--devices", "4", *QUICK], ["info", "{}"]]),
        "placement": (placement, [["solve", "{}", *QUICK], ["info", "{}"]]),
        "result-pipeline": (results["pipeline"][1], [["evaluate", str(results["pipeline"][0]), "{}"]]),
        "result-strategy": (results["strategy"][1], [["evaluate", str(results["strategy"][0]), "{}"]]),
        "result-placement": (results["placement"][1], [["evaluate", str(results["placement"][0]), "{}"]]),
    }


def _tiny_piper() -> dict:
    """Three layers a -> b -> c in Piper's format, two configurations each, on 4 devices."""

    def cfg(name: str, p: float, a: float, fw: dict, bw: dict) -> dict:
        return {
            "id": name, "timePerSample": p, "parameterSize": 8.0, "memoryUsageA": a, "memoryUsageB": 1.0,
            "syncTimeFw": fw, "syncTimeBw": bw,
        }  # fmt: skip

    def node(i: int, fw: dict, bw: dict) -> dict:
        both = [cfg("vanilla", 1.0 + i, 2.0, fw, bw), cfg("activation recomp", 1.5 + i, 1.0, fw, bw)]
        return {"id": i, "name": "abc"[i], "TMPCs": {"1": both, "2": [cfg("vanilla", 0.6 + i, 1.0, fw, bw)]}}

    return {
        "maxMemoryPerDevice": 100.0, "maxDevices": 4, "bandwidth": 10.0, "mbsInBatch": 4,
        "nodes": [node(0, {}, {"1": 0.5}), node(1, {"0": 0.5}, {"2": 0.0}), node(2, {"1": 0.0}, {})],
        "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 5.0}, {"sourceId": 1, "destId": 2, "communicationCost": 3.0}],
    }  # fmt: skip
