r"""Data model of the joint problem on a cluster of device kinds (issue 40, item 4).

The graph is the homogeneous joint problem's (:class:`~milp_partition.joint.problem.JointProblem`: layers with
configurations per tensor-parallel degree ``t``, edges carrying ``c`` bytes per sample); here each device kind
``k`` has its own copy of the per-layer configurations, priced with that kind's profile (``tables[k]``), its
count ``K_k``, memory ``M_k``, devices per node (the largest ``t`` of the kind) and bandwidth ``B_k``.

A plan is an ordered list of stages ``1..l`` (a chain of ideals of the graph, as in the homogeneous problem;
on a chain of layers: contiguous stages in layer order).  Stage ``i`` has one kind ``k_i``, a data-parallel
degree ``d_i``, a tensor-parallel degree ``t_i`` (offered by ``tables[k_i]``, at most the kind's devices per node)
and, per node, one configuration of ``tables[k_i]`` for ``t_i``.  With ``s_i = d_i + ... + d_l`` and
``y_i = ceil(s_i / d_i)``:

.. math::

    \sum_{i : k_i = k} d_i t_i \le K_k \quad \forall k \qquad (c)\ \text{devices per kind}

    d_i \mid N, \qquad \sum_i d_i \le N \qquad (c)\ \text{data parallelism}

    \sum_{v \in S_i} (a_v y_i + b_v) \le M_{k_i} \qquad (c)\ \text{memory}

and the objective is Piper's time per sample with each stage on its kind,

.. math::

    \max_i\ TPS_i, \qquad TPS_i = \frac{\sum_v p_v}{d_i}
        + \frac{1}{B_{k_i}} \Big( \frac{E_i}{d_i} + \sum_v \frac{4 (d_i - 1) w_v}{d_i N} \Big)

(``E_i``: twice the bytes of the edges crossing the stage's boundary plus the configurations' sync bytes on them;
every figure from ``tables[k_i]``).  With one kind this is exactly the homogeneous problem.  The independent
evaluation is :mod:`milp_partition.verifiers.joint_mixed`; the exact method :mod:`milp_partition.joint.mixed_dp`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from milp_partition.joint.problem import JointProblem


@dataclass(frozen=True)
class MixedKind:
    """One device kind of the cluster as the mixed joint problem sees it.

    Attributes
    ----------
    name
        The kind's name (``H100``); the key of its table.
    count
        ``K_k``: devices of this kind available.
    memory_bytes
        ``M_k``: memory a plan may fill on one device.
    devices_per_node
        The largest tensor-parallel degree of this kind (a tensor-parallel group stays within a node).
    bandwidth_bytes_per_s
        ``B_k``: bandwidth from one device of this kind to the outside (stage boundaries, data-parallel all-reduce).
    profile
        Where the kind's prices came from (a datasheet name or a profile file), for the report.
    """

    name: str
    count: int
    memory_bytes: float
    devices_per_node: int
    bandwidth_bytes_per_s: float
    profile: str = ""


@dataclass(frozen=True)
class MixedJointProblem:
    """The joint problem on a cluster of kinds: per kind a :class:`JointProblem` of the same graph, priced on the kind.

    ``tables[kind.name]`` holds the graph's nodes and edges with that kind's configurations; its ``cluster`` is
    not read (the kind's figures are in ``kinds``; ``microbatches`` is ``N``).  Every table has the same node ids in
    the same order and the same edges (:func:`check_tables`).
    """

    kinds: tuple[MixedKind, ...]
    tables: Mapping[str, JointProblem]
    microbatches: int
    name: str = ""
    source: str = ""
    notes: tuple[str, ...] = ()

    @property
    def total_devices(self) -> int:
        """Devices of every kind together."""
        return sum(k.count for k in self.kinds)

    def kind(self, name: str) -> MixedKind:
        """The kind named ``name`` (``KeyError`` if none)."""
        for k in self.kinds:
            if k.name == name:
                return k
        raise KeyError(name)

    def degrees(self, name: str) -> tuple[int, ...]:
        """The tensor-parallel degrees kind ``name`` offers: its table's, at most its devices per node and count."""
        kind = self.kind(name)
        return tuple(t for t in self.tables[name].degrees if t <= min(kind.devices_per_node, kind.count))

    @property
    def graph(self) -> JointProblem:
        """The first kind's table (for the node ids, names and edges every table shares)."""
        return self.tables[self.kinds[0].name]


def check_tables(problem: MixedJointProblem) -> list[str]:
    """What is wrong with the tables' agreement (same nodes in the same order, the same edges in the same order);
    empty when they agree.  An edge's bytes may differ between kinds: a message's time is written as bytes at the
    kind's bandwidth with its link's latency folded in (:mod:`milp_partition.costmodel.messages`), so each kind's
    stages price a crossing edge from that kind's own table."""
    bad: list[str] = []
    if not problem.kinds:
        return ["the cluster has no device kind"]
    names = [k.name for k in problem.kinds]
    if len(set(names)) != len(names):
        bad.append(f"a kind is named twice: {names}")
    missing = [n for n in names if n not in problem.tables]
    if missing:
        return [*bad, f"no configurations for kinds {missing}"]
    ref = problem.graph
    ids = [n.id for n in ref.nodes]
    edges = [(e.source, e.target) for e in ref.edges]
    for n in names[1:]:
        tab = problem.tables[n]
        if [v.id for v in tab.nodes] != ids:
            bad.append(f"kind {n!r}: its nodes differ from kind {names[0]!r}'s")
        if [(e.source, e.target) for e in tab.edges] != edges:
            bad.append(f"kind {n!r}: its edges differ from kind {names[0]!r}'s")
    return bad


@dataclass(frozen=True)
class MixedStage:
    """One stage of a plan: its nodes, its kind, degrees and each node's configuration id."""

    nodes: tuple[str, ...]
    kind: str
    data_parallel: int
    tensor_parallel: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class MixedPlan:
    """Stages in pipeline order (first stage first)."""

    stages: tuple[MixedStage, ...]


def mixed_plan_to_dict(plan: MixedPlan) -> list[dict[str, object]]:
    """The ``stages`` list of the result JSON (without the evaluated figures)."""
    return [
        {
            "nodes": list(st.nodes),
            "kind": st.kind,
            "data_parallel": st.data_parallel,
            "tensor_parallel": st.tensor_parallel,
            "configs": dict(st.configs),
        }
        for st in plan.stages
    ]
