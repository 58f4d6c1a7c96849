"""Problem statements and their solutions: plain data, no solving.

An :class:`Instance` is what a file holds (a graph and, where the format has
one, a cluster).  A :class:`PipelineProblem` adds the settings that make it a
well-posed pipeline-partitioning problem.  The exact definition lives in
:mod:`milp_partition.formulations.pipeline` (as an integer program) and, independently, in
:mod:`milp_partition.verifiers.pipeline` (as a checker).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from milp_partition.cluster import CPU_KIND, Cluster
from milp_partition.errors import InputError
from milp_partition.graph import Graph


@dataclass(frozen=True)
class Instance:
    """What an input file holds.

    Attributes
    ----------
    graph
        The computational graph.
    cluster
        The cluster, when the format carries one (the Tarnawski JSON does; a
        PipeDream profile does not).
    source
        The file it was read from, for messages.
    """

    graph: Graph
    cluster: Cluster | None = None
    source: str = ""


PipelineObjective = Literal["time", "memory"]
MemoryModel = Literal["static", "1f1b"]
MessageModel = Literal["per_source", "per_edge"]


@dataclass(frozen=True)
class PipelineSettings:
    """Settings of the pipeline-partitioning problem.

    Attributes
    ----------
    contiguous
        Forward nodes on each device must form a contiguous (convex) set.
    objective
        ``"time"``: least time per sample (largest device load).  ``"memory"``: least
        largest per-accelerator peak memory subject to time per sample at most
        ``max_time_per_sample`` (the memory-balancing aim of mCAP).
    max_time_per_sample
        Bound on time per sample for the ``"memory"`` objective, in the graph's time unit.
    memory_model
        ``"static"``: an accelerator holds the sum of its nodes' parameter, activation
        and other bytes.  ``"1f1b"``: a training pipeline of s stages (s = number of
        accelerators, stage i on the i-th accelerator, every edge between forward nodes
        going to the same or a later stage, every edge between backward nodes to the same
        or an earlier one); stage i (0-based) holds ``optimizer_state_factor * param_bytes +
        (s - i) * activation_bytes + other_bytes`` of its nodes.  The command line's default
        is :func:`default_memory_model`.
    optimizer_state_factor
        Multiplier on parameter bytes under ``"1f1b"`` (1: weights only; 3: weights,
        gradients and momentum; 4: Adam).
    backward_transfers
        Count each cross-device tensor twice (activation forward, gradient backward) when
        its time is derived from bytes.  ``None``: do so when the graph's forward nodes carry
        backward time (a training profile without separate backward nodes).
    messages
        How cross-device transfers are counted.  ``"per_source"``: once per source node and
        direction, the largest of its out-edges' transfer times (the definition of Tarnawski's
        and PipeDream's instances).  ``"per_edge"``: one message per edge whose ends are on
        different devices, its own transfer time paid by the device that sends it and by the one
        that receives it: the price the joint problem gives the same plan of an imported graph
        (:mod:`milp_partition.costmodel.messages`); the command line's choice for a graph written by
        ``milp-partition import`` (one with a ``layers`` object).
    """

    contiguous: bool = True
    objective: PipelineObjective = "time"
    max_time_per_sample: float | None = None
    memory_model: MemoryModel = "static"
    optimizer_state_factor: float = 1.0
    backward_transfers: bool | None = None
    messages: MessageModel = "per_source"

    def __post_init__(self) -> None:
        if self.messages not in ("per_source", "per_edge"):
            raise InputError(f"messages must be 'per_source' or 'per_edge', got {self.messages!r}", where="settings")
        if self.objective not in ("time", "memory"):
            raise InputError(f"objective must be 'time' or 'memory', got {self.objective!r}", where="settings")
        if self.memory_model not in ("static", "1f1b"):
            raise InputError(f"memory_model must be 'static' or '1f1b', got {self.memory_model!r}", where="settings")
        if self.objective == "memory":
            t = self.max_time_per_sample
            if t is None or not isinstance(t, (int, float)) or math.isnan(t) or t < 0:
                raise InputError(
                    "the 'memory' objective needs max_time_per_sample, a non-negative bound on time per sample",
                    where="settings",
                )
        f = self.optimizer_state_factor
        if not isinstance(f, (int, float)) or math.isnan(f) or math.isinf(f) or f < 0:
            raise InputError(f"optimizer_state_factor must be a finite non-negative number, got {f!r}", where="settings")


def default_memory_model(graph: Graph) -> MemoryModel:
    """The command line's memory model when none is given: ``"1f1b"`` for a training graph with backward nodes whose
    nodes save activations (an imported ``--training`` graph: the micro-batches in flight of a 1F1B schedule, as the
    joint planner counts them), ``"static"`` for any other graph (forward-only, PipeDream profiles, Tarnawski files)."""
    training = any(n.is_backward for n in graph.nodes) and any(n.activation_bytes > 0 for n in graph.nodes)
    return "1f1b" if training else "static"


@dataclass(frozen=True)
class PipelineProblem:
    """A graph, a cluster and settings: one pipeline-partitioning problem.

    The devices are the cluster's accelerators followed by its host CPU cores,
    named ``cpu0 .. cpu{c-1}``; see :meth:`device_ids`.
    """

    graph: Graph
    cluster: Cluster
    settings: PipelineSettings = field(default_factory=PipelineSettings)
    source: str = ""
    #: samples one pass of the graph computes (an imported graph's ``layers.batch_size``: its node and edge times are
    #: for a micro-batch of that many samples); ``None`` when the file does not say
    samples_per_microbatch: int | None = None

    @property
    def device_ids(self) -> list[str]:
        """Accelerator ids, then ``cpu0 .. cpu{c-1}`` for the host CPU cores."""
        return [d.id for d in self.cluster.devices] + [f"{CPU_KIND}{i}" for i in range(self.cluster.host_cpu_cores)]

    @property
    def device_kinds(self) -> list[str]:
        return [d.kind for d in self.cluster.devices] + [CPU_KIND] * self.cluster.host_cpu_cores

    @property
    def device_memory_bytes(self) -> list[int | None]:
        """Capacity of each device (``None`` = unbounded; CPU cores are unbounded)."""
        return [d.memory_bytes for d in self.cluster.devices] + [None] * self.cluster.host_cpu_cores


@dataclass(frozen=True)
class PipelineSolution:
    """Which device runs each node: ``assignment[node_id] = device_id``."""

    assignment: Mapping[str, str]
