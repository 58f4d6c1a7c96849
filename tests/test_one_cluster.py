"""Issue 41 item 2: one cluster model.  Every reader fills the one :class:`~milp_partition.cluster.Cluster`, no other
cluster class exists in the package, and a homogeneous cluster is one device kind."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

import milp_partition
from milp_partition.calibration.profile import resolve_profile
from milp_partition.cli.dispatch import build_parser
from milp_partition.cli.pipeline import imported_profile
from milp_partition.cli.pipeline import problem_from_args as pipeline_from_args
from milp_partition.cluster import (
    Cluster,
    Device,
    DeviceKind,
    KindColumn,
    Link,
    LinkFit,
    homogeneous_cluster,
    kinds_cluster,
    make_cluster,
    one_kind_cluster,
)
from milp_partition.errors import InputError
from milp_partition.io import read_instance
from milp_partition.io.galvatron import read_galvatron, read_hardware
from milp_partition.io.piper import read_joint
from milp_partition.io.sailor import read_sailor
from milp_partition.joint.layers import LayerPlanSettings, joint_from_imported
from milp_partition.placement.convert import placement_from_instance_file
from tests.source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"
PACKAGE_FOLDERS = (Path(milp_partition.__file__).parent, ROOT / "formulations", ROOT / "heuristics")


def _one_kind(cluster: Cluster, count: int, memory_bytes: float | None) -> None:
    """``cluster`` is a Cluster of one kind with ``count`` devices of ``memory_bytes`` each."""
    assert type(cluster) is Cluster
    assert len(cluster.kinds) == 1 and cluster.one_kind.name in cluster.kinds
    assert cluster.device_count == count == sum(c.count for c in cluster.columns)
    assert cluster.memory_bytes == memory_bytes
    memory, counts = cluster.kind_arrays()
    assert counts == [count] and memory == [math.inf if memory_bytes is None else float(memory_bytes)]


def test_pipeline_json_reads_into_the_cluster() -> None:
    inst = read_instance(ROOT / "examples" / "tiny.json")
    raw = json.loads((ROOT / "examples" / "tiny.json").read_text())["cluster"]
    assert inst.cluster is not None
    assert [d.id for d in inst.cluster.devices] == [d["id"] for d in raw["devices"]]
    mems = {d.get("memory_bytes") for d in raw["devices"]}
    _one_kind(inst.cluster, len(raw["devices"]), next(iter(mems)))
    assert inst.cluster.link == Link(raw["link"]["latency_s"], raw["link"]["bandwidth_bytes_per_s"])


def test_tarnawski_reads_into_the_cluster() -> None:
    path = sorted((SHARED / "pipeline").glob("*/*.json"))[0]
    raw = json.loads(path.read_text())
    inst = read_instance(path)
    assert inst.cluster is not None
    _one_kind(inst.cluster, raw["maxFPGAs"], int(raw["maxSizePerFPGA"]))


def test_placement_from_a_graph_file_reads_the_cluster() -> None:
    """A graph file's cluster is what placement places on: its devices, then the host CPU cores."""
    path = ROOT / "examples" / "tiny.json"
    inst = read_instance(path)
    assert inst.cluster is not None
    problem = placement_from_instance_file(path)
    assert list(problem.device_ids) == inst.cluster.accelerator_ids + [f"cpu{c}" for c in range(inst.cluster.host_cpu_cores)]


def test_piper_joint_file_reads_into_the_cluster() -> None:
    problem = read_joint(SHARED / "joint" / "bert32a100.json")
    raw = json.loads((SHARED / "joint" / "bert32a100.json").read_text())
    _one_kind(problem.cluster, raw["maxDevices"], raw["maxMemoryPerDevice"])
    assert problem.cluster.bandwidth_bytes_per_s == raw["bandwidth"]
    assert problem.microbatches == raw["mbsInBatch"]  # a property of the run, not of the cluster
    assert not hasattr(problem.cluster, "microbatches")


def test_imported_graph_with_flags_reads_into_the_cluster(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from test_joint_layers import _imported

    from milp_partition.importers.models import mlp

    data = _imported(tmp_path, mlp(in_features=32, hidden=64, layers=2, classes=8), "4x32", "mlp")
    joint = joint_from_imported(data, "mlp", LayerPlanSettings(devices=4, memory_bytes=8 * 2**30, bandwidth_bytes_per_s=1e10))
    _one_kind(joint.cluster, 4, 8 * 2**30)
    assert joint.cluster.bandwidth_bytes_per_s == 1e10
    args = build_parser().parse_args(
        ["solve", str(tmp_path / "mlp.json"), "--devices", "3", "--memory", "2GiB", "--bandwidth", "1GB/s"]
    )
    pipeline = pipeline_from_args(args)
    _one_kind(pipeline.cluster, 3, 2 * 2**30)
    # the bandwidth is the flag's; the latency the import profile's device-to-device link's (one price: oneprice)
    assert pipeline.cluster.link.bandwidth_bytes_per_s == 1e9
    assert pipeline.cluster.link.latency_s == resolve_profile(imported_profile(tmp_path / "mlp.json")).links["d2d"].alpha_s
    # the compute profile: the import profile's peak FLOP/s for the import's dtype, on both problems' one kind
    dtype = json.loads((tmp_path / "mlp.json").read_text())["layers"].get("dtype", "float32")
    peak = resolve_profile(imported_profile(tmp_path / "mlp.json")).compute[dtype].peak_flop_per_s
    assert peak > 0 and joint.cluster.one_kind.peak_flops_per_s == peak == pipeline.cluster.one_kind.peak_flops_per_s


def test_galvatron_hardware_folder_reads_into_the_cluster() -> None:
    root = SHARED / "galvatron"
    cluster = read_hardware(root / "hardware", 8, 36 * 1024)
    _one_kind(cluster, 8, 36 * 2**30)
    assert cluster.one_kind.devices_per_node == 8
    assert cluster.collectives is not None and cluster.collectives.source == str(root / "hardware")
    problem = read_galvatron(root / "models/llama2-7b", root / "hardware", devices=8, memory_mb=36 * 1024, global_batch=16)
    assert problem.cluster == cluster
    # the links: point-to-point bandwidth of two stages within one node (GB/s: one MB in 1/x ms); one node, no link
    # between nodes (free)
    p2p_node = json.loads((root / "hardware" / "p2p_bandwidth_1nodes_8gpus_per_node.json").read_text())["pp_size_2"]
    assert cluster.node_link == Link(0.0, p2p_node * 2**20 * 1e3) and cluster.link == Link()
    assert cluster.node_link.transfer_seconds(2**20) == pytest.approx(1e-3 / p2p_node)
    two = read_hardware(root / "hardware", 16, 36 * 1024)  # two nodes of 8: stages of whole nodes cross between them
    p2p_two = json.loads((root / "hardware" / "p2p_bandwidth_2nodes_8gpus_per_node.json").read_text())["pp_size_2"]
    assert two.link == Link(0.0, p2p_two * 2**20 * 1e3) and two.node_link == cluster.node_link
    assert two.link.bandwidth_bytes_per_s < two.node_link.bandwidth_bytes_per_s
    assert (problem.devices, problem.memory_mb, problem.collectives) == (8, 36 * 1024, cluster.collectives)


def test_sailor_folder_reads_into_the_cluster() -> None:
    problem = read_sailor(SHARED / "hetero", setting="opt350-a32-v96")
    cluster = problem.cluster
    assert type(cluster) is Cluster and not cluster.devices  # Sailor counts devices per (kind, zone), names none
    assert set(cluster.kinds) == {"A100-40", "V100-16"}
    assert cluster.device_count == 32 + 96 == sum(cluster.devices_of_kind(k) for k in cluster.kinds)
    assert cluster.kinds["A100-40"].memory_bytes == 40 * 2**30 and cluster.kinds["V100-16"].memory_bytes == 16 * 2**30
    assert cluster.link_fits and all(isinstance(f, LinkFit) for f in cluster.link_fits.values())
    with pytest.raises(InputError, match="2 device kinds"):
        _ = cluster.memory_bytes  # a one-kind reader refuses a mixed cluster, naming why


def _cluster_like_classes() -> list[str]:
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(parsed(path)):
                if isinstance(node, ast.ClassDef) and (node.name.endswith("Cluster") or node.name == "Hardware"):
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return found


def test_no_other_cluster_class_exists() -> None:
    assert _cluster_like_classes() == ["milp_partition/cluster.py:Cluster"]
    assert not hasattr(milp_partition, "JointCluster")


def test_a_homogeneous_cluster_is_one_kind() -> None:
    named = homogeneous_cluster(4, 2**30, link=Link(1e-6, 1e9))
    _one_kind(named, 4, 2**30)
    assert named.accelerator_ids == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert named.columns == (KindColumn("gpu", "zone0", 4),)
    counted = one_kind_cluster(4, 2**30, link=Link(1e-6, 1e9))
    _one_kind(counted, 4, 2**30)
    assert (counted.kinds, counted.columns, counted.link) == (named.kinds, named.columns, named.link)


def test_named_devices_give_their_kinds() -> None:
    mixed = make_cluster([Device("a", "x", 10), Device("b", "x", 20), Device("c", "y", 5)])
    assert mixed.kinds == {"x": DeviceKind("x", None), "y": DeviceKind("y", 5)}  # x's devices differ in memory
    assert (mixed.devices_of_kind("x"), mixed.devices_of_kind("y"), mixed.device_count) == (2, 1, 3)
    with pytest.raises(InputError, match="2 device kinds"):
        _ = mixed.memory_bytes
    uneven = make_cluster([Device("a", "x", 10), Device("b", "x", 20)])
    with pytest.raises(InputError, match="differ in memory"):
        _ = uneven.memory_bytes
    # the kinds follow the devices when they are replaced
    from dataclasses import replace

    assert replace(uneven, devices=(Device("a", "x", 7),)).kinds == {"x": DeviceKind("x", 7)}


def test_kinds_cluster_checks_its_columns() -> None:
    kinds = {"A": DeviceKind("A", 2**30, 4)}
    with pytest.raises(InputError, match="unknown device kind 'B'"):
        kinds_cluster(kinds, [KindColumn("B", "z", 1)], {})
    with pytest.raises(InputError, match="no device"):
        kinds_cluster(kinds, [KindColumn("A", "z", 0)], {})
    cluster = kinds_cluster(kinds, [KindColumn("A", "z", 3)], {})
    _one_kind(cluster, 3, 2**30)
    with pytest.raises(InputError, match="no network fit"):
        cluster.link_fit(("z", "A", 1, "z", "A", 1))


def test_the_joint_c_pass_takes_the_kinds_as_arrays() -> None:
    """The compiled joint DP reads the cluster's kinds (memory and device count per kind) as arrays and refuses more
    than the one kind the joint problem takes."""
    import numpy as np

    from milp_partition.joint import native
    from milp_partition.joint.dp import joint_data
    from tests.test_joint_bruteforce import random_problem

    if native._ext is None:
        pytest.skip("the compiled joint DP is not built")
    problem = random_problem(3)
    args = list(native._context_args(joint_data(problem)))
    memory, count = args[10], args[11]
    assert args[6] == 1 and memory.tolist() == [problem.memory_bytes] and count.tolist() == [problem.cluster.device_count]
    native._ext.new(*args)  # one kind: accepted
    args[6], args[10], args[11] = 2, np.repeat(memory, 2), np.repeat(count, 2)
    with pytest.raises(ValueError, match="one device kind"):
        native._ext.new(*args)


def test_strategy_tables_read_into_the_cluster() -> None:
    """A strategy-tables file's ``devices`` and ``memory_limit_bytes`` are its one-kind cluster's count and memory."""
    from milp_partition.io.strategy_tables import read_strategy_tables, strategy_from_dict, strategy_to_dict

    path = SHARED / "strategy" / "alexnet_p8.json"
    raw = json.loads(path.read_text())
    problem = read_strategy_tables(path)
    _one_kind(problem.cluster, raw["devices"], None)
    assert (problem.devices, problem.memory_limit_bytes) == (raw["devices"], None)
    limited = strategy_from_dict({**raw, "memory_limit_bytes": 123456789}, "limited.json")
    _one_kind(limited.cluster, raw["devices"], 123456789)
    assert strategy_to_dict(limited)["memory_limit_bytes"] == 123456789  # written back from the cluster
    assert limited.with_memory_limit(None).memory_limit_bytes is None and limited.memory_limit_bytes == 123456789


def test_strategy_layers_with_flags_read_into_the_cluster() -> None:
    """A strategy-layers file with ``--devices`` and ``--memory``: the CLI builds the same one-kind cluster."""
    from milp_partition.cli.strategy import problem_from_args as strategy_from_args

    args = build_parser().parse_args(["solve", str(ROOT / "examples" / "gpt4_layers.json"), "--devices", "4", "--memory", "3GiB"])
    problem = strategy_from_args(args)
    _one_kind(problem.cluster, 4, 3 * 2**30)
    assert problem.cluster.one_kind.peak_flops_per_s == resolve_profile("H100").compute["float32"].peak_flop_per_s
    assert (problem.devices, problem.memory_limit_bytes) == (4, 3 * 2**30)


def test_placement_instance_file_reads_into_the_cluster() -> None:
    """Moirai's files (memory in bits): named devices with their memory in bytes, one kind per distinct (speed,
    capacity); the capacities the solvers read stay in the file's unit."""
    from milp_partition.io.placement_instance import read_placement_instance

    path = SHARED / "placement" / "GoogLeNet.json"
    raw = json.loads(path.read_text())
    assert raw["memory_unit"] == "bit"
    problem = read_placement_instance(path)
    cluster = problem.cluster
    assert type(cluster) is Cluster
    assert cluster.accelerator_ids == [d["id"] for d in raw["devices"]] == list(problem.device_ids)
    assert [d.memory_bytes for d in cluster.devices] == [d["memory"] // 8 for d in raw["devices"]]
    assert problem.device_memory.tolist() == [float(d["memory"]) for d in raw["devices"]]  # unchanged, in bits
    assert len(cluster.kinds) == 4  # four GPUs of different speed and memory
    assert sorted(cluster.memory_of(k) for k in cluster.kinds) == sorted(d["memory"] // 8 for d in raw["devices"])


def test_placement_instance_kinds_follow_speed_and_capacity() -> None:
    """Devices with the same time on every task and the same capacity share a kind; a named kind is kept and
    written back; an abstract memory unit gives no bytes."""
    from milp_partition.io.placement_instance import placement_from_dict, placement_to_dict

    def instance(devices: list[dict], unit: str) -> dict:
        return {
            "format": "placement-instance/1",
            "memory_unit": unit,
            "devices": devices,
            "tasks": [{"id": "a", "time": [2.0, 2.0, 1.0], "memory": 1}, {"id": "b", "time": [3.0, 3.0, 3.0], "memory": 1}],
            "edges": [],
        }

    same = placement_from_dict(instance([{"id": "x", "memory": 8}, {"id": "y", "memory": 8}, {"id": "z", "memory": 8}], "B"))
    assert [d.kind for d in same.cluster.devices] == ["kind0", "kind0", "kind1"]  # z is faster on task a
    assert same.cluster.kinds["kind0"].memory_bytes == 8 and same.cluster.devices_of_kind("kind0") == 2
    bigger = placement_from_dict(instance([{"id": "x", "memory": 8}, {"id": "y", "memory": 16}, {"id": "z", "memory": 8}], "GiB"))
    assert [d.kind for d in bigger.cluster.devices] == ["kind0", "kind1", "kind2"]  # y holds more
    assert [d.memory_bytes for d in bigger.cluster.devices] == [8 * 2**30, 16 * 2**30, 8 * 2**30]
    abstract = placement_from_dict(instance([{"id": "x", "memory": 8}, {"id": "y"}, {"id": "z", "memory": 8}], "abstract"))
    assert [d.memory_bytes for d in abstract.cluster.devices] == [None, None, None]  # no bytes in an abstract unit
    assert abstract.device_memory.tolist()[0] == 8.0
    named = placement_from_dict(
        instance(
            [{"id": "x", "memory": 8, "kind": "A100"}, {"id": "y", "memory": 8, "kind": "A100"}, {"id": "z", "kind": "H100"}], "B"
        )
    )
    assert [d.kind for d in named.cluster.devices] == ["A100", "A100", "H100"]
    again = placement_from_dict(placement_to_dict(named))
    assert again.cluster.devices == named.cluster.devices and again.cluster.kinds == named.cluster.kinds


def test_placement_from_a_graph_file_holds_the_graph_cluster() -> None:
    path = ROOT / "examples" / "tiny.json"
    inst = read_instance(path)
    problem = placement_from_instance_file(path)
    assert problem.cluster == inst.cluster


def _problem_classes() -> dict[str, set[str]]:
    """Each ``<problem>/problem.py``'s ``*Problem`` class and the names it defines (fields and properties)."""
    found: dict[str, set[str]] = {}
    for path in sorted(Path(milp_partition.__file__).parent.glob("*/problem.py")):
        for node in parsed(path).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Problem"):
                names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                names |= {s.name for s in node.body if isinstance(s, ast.FunctionDef)}
                found[f"{path.parent.name}:{node.name}"] = names
    return found


def test_every_problem_holds_a_cluster() -> None:
    """Every problem's data class has a ``cluster`` (pipeline, strategy, placement, joint, Galvatron, hetero)."""
    classes = _problem_classes()
    assert {"pipeline", "strategy", "placement", "joint", "galvatron", "hetero"} <= {k.split(":")[0] for k in classes}
    assert [k for k, names in classes.items() if "cluster" not in names] == []
