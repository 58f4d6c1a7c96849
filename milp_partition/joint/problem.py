"""Data model of the joint problem (Piper's problem): stages x data x tensor parallelism x recomputation.

A plan is an ordered list of stages ``1..l``.  Stage ``i`` has a node set ``S_i``, a
data-parallel degree ``d_i``, a tensor-parallel degree ``t_i`` and, for each node of
``S_i``, one configuration from that node's list for ``t_i``.  With
``s_i = d_i + ... + d_l`` and ``y_i = ceil(s_i / d_i)`` one device of stage ``i`` holds
``sum_v (a_v * y_i + b_v)`` bytes and the stage's time per sample is

    TPS_i = (sum_v p_v) / d_i + (E_i / d_i + sum_v 4 (d_i - 1) w_v / (d_i N)) / B

(``E_i``: twice the bytes of the edges crossing the stage's boundary, plus the
configurations' sync bytes on them).  The objective is ``max_i TPS_i``.  The
definition is in ``../shared/benchmarks/README.md`` (section ``joint/``); the
independent evaluation is :mod:`milp_partition.verifiers.joint`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from milp_partition.cluster import Cluster, Link, one_kind_cluster
from milp_partition.joint.schedule import JointSchedule
from milp_partition.settings import CommonSettings


@dataclass(frozen=True)
class JointConfig:
    """One configuration of a node on ``t`` devices.

    Attributes
    ----------
    id
        The configuration's name (e.g. ``vanilla``, ``activation recomp``).
    time_per_sample_s
        ``p``: forward + backward compute seconds for one sample.
    parameter_bytes
        ``w``: parameter bytes (data-parallel gradient all-reduce traffic).
    activation_bytes
        ``a``: bytes per micro-batch in flight.
    fixed_bytes
        ``b``: bytes held regardless of micro-batches.
    sync_fw_bytes
        Predecessor id -> extra bytes this configuration adds on that edge.
    sync_bw_bytes
        Successor id -> extra bytes this configuration adds on that edge.
    """

    id: str
    time_per_sample_s: float
    parameter_bytes: float
    activation_bytes: float
    fixed_bytes: float
    sync_fw_bytes: Mapping[str, float] = field(default_factory=dict)
    sync_bw_bytes: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class JointNode:
    """A layer: its configurations per tensor-parallel degree ``t``."""

    id: str
    name: str
    configs: Mapping[int, tuple[JointConfig, ...]]


@dataclass(frozen=True)
class JointEdge:
    """A data dependency ``source -> target`` carrying ``bytes`` (``c``) per sample.

    On a graph written by ``milp-partition import`` ``c`` is the link's time of the edge's message written as bytes
    at the cluster's bandwidth (latency included: :func:`milp_partition.joint.layers.edge_bytes`); on Piper's
    files it is the file's bytes.
    """

    source: str
    target: str
    bytes: float


def joint_cluster(devices: int, memory_bytes: float, bandwidth_bytes_per_s: float) -> Cluster:
    """The joint problem's cluster: ``devices`` devices of one kind with ``memory_bytes`` each, ``bandwidth_bytes_per_s``
    between them (the figures as given: the readers check them, naming the file and field)."""
    return one_kind_cluster(devices, memory_bytes, link=Link(0.0, bandwidth_bytes_per_s))


@dataclass(frozen=True)
class JointShape:
    """A plan shape forced by the user: ``stages`` pipeline stages, every stage's data- and/or tensor-parallel degree.

    ``None`` leaves that part free.  The optimum is then proven within the shape (the DP admits only
    such plans; the verifier rejects any other).
    """

    stages: int | None = None
    data_parallel: int | None = None
    tensor_parallel: int | None = None

    def __post_init__(self) -> None:
        for name in ("stages", "data_parallel", "tensor_parallel"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")

    def violations(self, degrees: list[int], tensor: list[int] | None = None) -> list[str]:
        """What a plan with these data-parallel (and tensor-parallel) degrees, one per stage, breaks of the shape."""
        bad = []
        if self.tensor_parallel is not None and tensor is not None and any(t != self.tensor_parallel for t in tensor):
            bad.append(f"tensor-parallel degrees {tensor}; the forced shape has {self.tensor_parallel} for every stage")
        if self.stages is not None and len(degrees) != self.stages:
            bad.append(f"the plan has {len(degrees)} stages; the forced shape has {self.stages}")
        if self.data_parallel is not None and any(d != self.data_parallel for d in degrees):
            bad.append(f"data-parallel degrees {degrees}; the forced shape has {self.data_parallel} for every stage")
        return bad


@dataclass(frozen=True)
class JointProblem:
    """A joint-planning instance: the layer graph with configurations, the cluster and the micro-batches per batch.

    ``cluster``: one device kind (:func:`joint_cluster`): ``k`` devices (``cluster.device_count``) with ``M`` bytes each
    (:attr:`memory_bytes`), ``B`` bytes per second to the outside (``cluster.bandwidth_bytes_per_s``).
    ``microbatches``: ``N``, micro-batches per batch (a property of the run, not of the cluster).  ``notes``: how the instance was made where that matters to a reader (e.g. a tensor-parallel
    degree not offered, from :mod:`milp_partition.joint.layers`).  ``shape``: a forced number of
    stages and/or data-parallel degree (:class:`JointShape`).
    """

    nodes: tuple[JointNode, ...]
    edges: tuple[JointEdge, ...]
    cluster: Cluster
    microbatches: int
    name: str = ""
    source: str = ""
    notes: tuple[str, ...] = ()
    #: a forced plan shape (``None``: free)
    shape: JointShape | None = None

    @property
    def degrees(self) -> tuple[int, ...]:
        """The tensor-parallel degrees every node offers (the reader checks they agree)."""
        if not self.nodes:
            return ()
        return tuple(sorted(self.nodes[0].configs))

    @property
    def memory_bytes(self) -> float:
        """``M``: the memory of one device (the cluster's one kind; :class:`~milp_partition.errors.InputError` when it
        has several).  The joint readers always give one; unbounded reads as ``inf``."""
        memory = self.cluster.memory_bytes
        return math.inf if memory is None else memory

    def with_cluster(self, cluster: Cluster) -> JointProblem:
        """The same graph on another cluster."""
        return replace(self, cluster=cluster)

    def node(self, node_id: str) -> JointNode:
        """The node with id ``node_id`` (``KeyError`` if none)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


@dataclass(frozen=True)
class JointStage:
    """One pipeline stage of a plan: its nodes, degrees and each node's configuration id."""

    nodes: tuple[str, ...]
    data_parallel: int
    tensor_parallel: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class JointPlan:
    """Stages in pipeline order (first stage first)."""

    stages: tuple[JointStage, ...]


def plan_to_dict(plan: JointPlan) -> list[dict[str, object]]:
    """The ``stages`` list of the result JSON (without the evaluated figures)."""
    return [
        {
            "nodes": list(st.nodes),
            "data_parallel": st.data_parallel,
            "tensor_parallel": st.tensor_parallel,
            "configs": dict(st.configs),
        }
        for st in plan.stages
    ]


@dataclass(frozen=True)
class JointSolveSettings(CommonSettings):
    """How :func:`milp_partition.joint.solve.solve_joint` works: the common settings
    (:class:`~milp_partition.settings.CommonSettings`; ``solver`` and ``seed`` reach the slot formulation's back-end,
    ``warm_start`` hints it the best verified plan and cuts off worse values) and the joint problem's own.

    Attributes
    ----------
    threads
        The DP runs on one thread; past ``max_ideals``, with two or more, the segment and stage bounds run beside
        the orders' DP and the polisher in a second process (:mod:`milp_partition.joint.beside`), the column bound
        prices with a second process (where the stage bound cannot run, k = 16 and the like: the second process runs
        the segment bound and then the column bound's all-states master beside the heuristics, whose columns start the
        master after them, and the polisher goes on beside that one instead, from the orders' plans), and CP-SAT gets
        them all.
    baselines
        Also run the Piper-style baseline (within ``schedule.piper_style``); the cheap PipeDream-2BW-style and
        all-data-parallel baselines always run (the best one's value is the exact search's first upper end).
    max_ideals
        Cap on the ideals (downsets) of the graph the exact DP enumerates.  Under it, a graph with more ideals (or
        pairs of them) than the DP's compiled passes take (:func:`milp_partition.joint.native.too_large`) takes the
        same route as one past it.
    method
        ``"dp"``: the exact DP, and the slot formulation (:mod:`milp_partition.formulations.joint`)
        only when the graph has more ideals than ``max_ideals``; ``"milp"``: the formulation only
        (the baselines still warm-start it).
    schedule
        Each phase of the search past ``max_ideals`` (and of the warm starts below it) and its share of the
        budget, declared in one value (:class:`~milp_partition.joint.schedule.JointSchedule`: the Piper-style
        warm start, the orders' DP, the polisher, the segment, column and stage bounds; the slot formulation has
        the rest); ``schedule.capped(polish=0)`` turns a phase off.
    """

    threads: int = field(default=1, kw_only=True)
    baselines: bool = True
    max_ideals: int = 200_000
    method: str = "dp"
    schedule: JointSchedule = field(default_factory=JointSchedule)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in ("dp", "milp"):
            raise ValueError(f"method must be 'dp' or 'milp', got {self.method!r}")
