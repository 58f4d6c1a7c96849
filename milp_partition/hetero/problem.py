"""Sailor's heterogeneous-cluster planning problem: the data (profiles per kind, a cluster of kinds) and a plan.

The problem (``../shared/benchmarks/hetero/README.md`` states it exactly): choose a micro-batch size
beta, contiguous stages S_0..S_{P-1} over the layers, one data-parallel degree D, and for every stage an
ordered list of D replicas, each a (kind, zone, tp) group; minimise the iteration time of Sailor's
simulator (``objective="sailor"``), or of its sound variant (``objective="sound"``: the gradient a stage
sends back is sized by its input, and no send is doubled).

Plain data only (layer 2): the cost of a plan is computed by :mod:`milp_partition.hetero.cost` and,
independently, by :mod:`milp_partition.verifiers.hetero`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from milp_partition.cluster import Cluster

Objective = Literal["sailor", "sound"]
#: Bytes per float (the simulator runs with fp16 off).
FLOAT_BYTES = 4
#: DeepSpeed's bucket size, in bytes: a gradient all-reduce is cut into pieces of this size.
BUCKET_BYTES = 500_000_000
#: Tensor-parallel degrees of the space.
TP_DEGREES = (1, 2, 4)


@dataclass(frozen=True)
class HeteroModel:
    """A model's profiles, per layer l = 0..layers-1.

    Attributes
    ----------
    name
        The model's key in the profile file (e.g. ``"OPT-350"``).
    layers
        Number of layers L (``num_all_layers``).
    num_layers
        Transformer blocks (``num_layers``; only Sailor's multi-VM branch reads it).
    optimizer_bytes_per_param
        Bytes of state per parameter float in the memory rule (24 for Adam, 20 for SGD).
    times
        ``(kind, mbs, tp)`` -> per-layer ``(forward_s, backward_s, update_s)``, only profiled triples.
    mbs_keys
        Per kind, the micro-batch sizes profiled (the simulator also uses them as its tp keys).
    params_floats
        ``tp`` -> per-layer parameter floats per GPU of a tp-group.
    act_mem_floats
        ``tp`` -> per-layer activation floats per sample.
    act_output_floats
        Per-layer output floats per sample (tp 1).
    """

    name: str
    layers: int
    num_layers: int
    optimizer_bytes_per_param: int
    times: Mapping[tuple[str, int, int], tuple[tuple[float, float, float], ...]]
    mbs_keys: Mapping[str, tuple[int, ...]]
    params_floats: Mapping[int, tuple[float, ...]]
    act_mem_floats: Mapping[int, tuple[float, ...]]
    act_output_floats: tuple[float, ...]


@dataclass(frozen=True)
class HeteroProblem:
    """One setting: a model, a global batch and a cluster of kinds (a trace row with its network fits)."""

    model: HeteroModel
    cluster: Cluster
    global_batch: int
    objective: Objective = "sailor"
    setting: str = ""
    source: str = ""

    def replica_valid(self, kind: str, mbs: int, tp: int) -> bool:
        """Whether a (kind, mbs, tp) replica is in the space: tp in {1, 2, 4}, at most the node size, profiled."""
        k = self.cluster.kinds.get(kind)
        return (
            k is not None
            and tp in TP_DEGREES
            and tp <= k.devices_per_node
            and tp in self.model.mbs_keys.get(kind, ())
            and (kind, mbs, tp) in self.model.times
        )

    def micro_batches(self) -> tuple[int, ...]:
        """Micro-batch sizes profiled for at least one kind of the cluster."""
        kinds = {c.kind for c in self.cluster.columns if c.count > 0}
        return tuple(sorted({b for (g, b, _t) in self.model.times if g in kinds}))


@dataclass(frozen=True)
class Replica:
    """One replica of a stage: a tensor-parallel group of ``tp`` devices of ``kind`` in ``zone``."""

    kind: str
    zone: str
    tp: int


@dataclass(frozen=True)
class HeteroPlan:
    """A plan: micro-batch size, stages as ``(first, end)`` layer ranges (end exclusive), replicas per stage in order."""

    mbs: int
    stages: tuple[tuple[int, int], ...]
    replicas: tuple[tuple[Replica, ...], ...]

    @property
    def dp(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0

    def used_devices(self) -> dict[tuple[str, str], int]:
        """Devices used per (kind, zone)."""
        out: dict[tuple[str, str], int] = {}
        for stage in self.replicas:
            for r in stage:
                out[(r.kind, r.zone)] = out.get((r.kind, r.zone), 0) + r.tp
        return out


def plan_to_sailor(plan: HeteroPlan) -> dict[str, Any]:
    """The plan in Sailor's plan format (``tools/score_plan.py`` and Sailor's simulator take it unchanged)."""
    used: dict[str, int] = {}
    for (kind, _zone), n in plan.used_devices().items():
        used[kind] = used.get(kind, 0) + n
    return {
        "mbs": plan.mbs,
        "pipeline_list": [
            {
                "num_stages": len(plan.stages),
                "layers_per_stage": [list(range(a, b)) for a, b in plan.stages],
                "dp": [len(s) for s in plan.replicas],
                "tmp_per_stage": [[[[[r.kind, r.tp, r.zone]], r.tp] for r in stage] for stage in plan.replicas],
            }
        ],
        "used_gpus": used,
    }


def plan_from_sailor(data: Mapping[str, Any]) -> HeteroPlan:
    """A plan from Sailor's format (one pipeline, one VM entry per replica); ValueError/KeyError/TypeError when not."""
    data = data.get("plan", data) if "pipeline_list" not in data else data
    pls = data["pipeline_list"]
    if len(pls) != 1:
        raise ValueError(f"the plan has {len(pls)} pipelines; the space has one")
    pl = pls[0]
    stages = []
    for layers in pl["layers_per_stage"]:
        ls = [int(x) for x in layers]
        if not ls or ls != list(range(ls[0], ls[0] + len(ls))):
            raise ValueError(f"stage layers {layers!r} are not a contiguous non-empty range")
        stages.append((ls[0], ls[-1] + 1))
    reps = []
    for i, stage in enumerate(pl["tmp_per_stage"]):
        row = []
        for rep in stage:
            vms, tp = rep[0], int(rep[1])
            if len(vms) != 1:
                raise ValueError(f"stage {i}: a replica with {len(vms)} VM entries is outside the space")
            kind, per_node, zone = str(vms[0][0]), int(vms[0][1]), str(vms[0][2])
            if per_node < tp:
                raise ValueError(f"stage {i}: gpus_per_node {per_node} below tp {tp}")
            row.append(Replica(kind, zone, tp))
        reps.append(tuple(row))
    return HeteroPlan(int(data["mbs"]), tuple(stages), tuple(reps))
