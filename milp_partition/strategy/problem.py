"""The layer-wise parallelization-strategy problem (PaSE, Alpa, Tofu): plain data, no solving.

Each layer (node) v picks one configuration c from its list; the cost of a choice
is ``sum_v node_cost[v][c_v] + sum_(u,v) edge_cost[(u,v)][c_u, c_v]`` (each edge
once).  Optionally each configuration has a per-device memory in bytes, and the
chosen configurations' memory must stay within ``memory_limit_bytes``.  The devices the
configurations split over and their memory are the problem's one-kind :class:`~milp_partition.cluster.Cluster`
(:attr:`StrategyProblem.cluster`; :func:`strategy_cluster` builds it).

Costs are in the instance's ``cost_unit`` (PaSE's tables: FLOP-equivalents per
device; divide by 1e13 for seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from milp_partition.cluster import Cluster, one_kind_cluster


@dataclass(frozen=True, eq=False)
class StrategyNode:
    """A layer and its configurations.

    Attributes
    ----------
    id, name
        Identifier and description (PaSE: op type and iteration domain).
    configs
        One name per configuration (PaSE: split factor of each domain dimension, ``1x4x1``).
    cost
        ``(len(configs),)`` cost of each configuration.
    memory_bytes
        ``(len(configs),)`` per-device memory of each configuration, or ``None`` when unknown.
    activation_bytes
        ``(len(configs),)`` the part of ``memory_bytes`` that is the layer's output
        activation (freed after its last consumer under the ``liveness`` memory model;
        the rest, parameters and optimizer state, stays resident), or ``None``: all resident.
    """

    id: str
    name: str
    configs: tuple[str, ...]
    cost: np.ndarray
    memory_bytes: np.ndarray | None = None
    activation_bytes: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class StrategyEdge:
    """A tensor between two layers: ``cost[i, j]`` when the source takes config i and the target config j."""

    source: str
    target: str
    cost: np.ndarray


def strategy_cluster(devices: int = 1, memory_limit_bytes: int | None = None) -> Cluster:
    """The strategy problem's cluster: ``devices`` devices of one kind with ``memory_limit_bytes`` each.

    Parameters
    ----------
    devices
        The number of devices p the configurations split over (the readers check it is a positive integer).
    memory_limit_bytes
        The memory of one device: the limit on the sum of the chosen configurations' per-device memory, or ``None``
        (unbounded).

    Returns
    -------
    Cluster
        One kind (:data:`~milp_partition.cluster.ACCELERATOR_KIND`), ``devices`` counted (not named) devices.
    """
    return one_kind_cluster(devices, memory_limit_bytes)


@dataclass(frozen=True, eq=False)
class StrategyProblem:
    """Layers, their configurations and the re-distribution costs between them.

    Attributes
    ----------
    cluster
        The one-kind :class:`~milp_partition.cluster.Cluster` the configurations split over: its device count is
        :attr:`devices` (p), the memory of its one kind is :attr:`memory_limit_bytes` (:func:`strategy_cluster`).
    memory_model
        ``"static"``: the sum over all layers of the chosen configurations'
        ``memory_bytes`` must fit.  ``"liveness"``: layers run one at a time in the
        *schedule*, the topological order that takes the ready layer listed first
        (Kahn's algorithm on the node order); a layer's resident memory
        (``memory_bytes - activation_bytes``) counts at every step, its output
        activation from its own step through the step of its last consumer (only
        its own step when it has none), and the memory at every step must fit.
        This is the model of inference, or of training with recomputation.
    """

    nodes: tuple[StrategyNode, ...]
    edges: tuple[StrategyEdge, ...]
    name: str = ""
    cost_unit: str = ""
    source: str = ""
    memory_model: str = "static"
    extra: Mapping[str, object] = field(default_factory=dict)
    cluster: Cluster = field(default_factory=strategy_cluster)

    @property
    def devices(self) -> int:
        """Number of devices p the configurations split over (the cluster's)."""
        return self.cluster.device_count

    @property
    def memory_limit_bytes(self) -> int | None:
        """Per-device memory limit on the sum of the chosen configurations' memory (the cluster's one kind's), or
        ``None``."""
        memory = self.cluster.memory_bytes
        return None if memory is None else int(memory)

    def with_memory_limit(self, memory_limit_bytes: int | None) -> StrategyProblem:
        """The same problem on the same devices with another memory per device (``None``: unbounded)."""
        return replace(self, cluster=self.cluster.with_memory(memory_limit_bytes))

    @property
    def index(self) -> dict[str, int]:
        return {n.id: i for i, n in enumerate(self.nodes)}

    @property
    def total_configs(self) -> int:
        return sum(len(n.configs) for n in self.nodes)


@dataclass(frozen=True)
class StrategySolution:
    """The configuration name chosen for each layer: ``choice[node_id] = config``."""

    choice: Mapping[str, str]
