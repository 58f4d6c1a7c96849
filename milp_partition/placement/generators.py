"""Seeded synthetic placement instances: layered DAGs, transformer-like and inception-like blocks.

For scaling runs (up to hundreds of thousands of tasks) and tests.  The arrays are
built with NumPy and validated by :func:`~milp_partition.placement.make_placement_problem`
(whose per-edge id checks dominate): a 200,000-task instance builds in about
two seconds.

Graphs (task indices are a topological order, so every graph is acyclic)
    ``layered``      layers of ``width`` tasks; each task of layer l > 0 reads
                     1..``max_fan_in`` random tasks of layer l - 1, or of layer
                     l - 2 with probability ``skip_probability``.
    ``transformer``  an input task, then blocks of: layer norm; per head q, k,
                     v, scores, softmax, context; concat, projection, residual
                     add; layer norm, FFN up, activation, FFN down, residual add.
    ``inception``    an input task, then blocks of ``branches`` parallel chains
                     (lengths 1, 2, 3, 1, 2, 3, ...) from the previous block's
                     output to a concat task.
    Block graphs are cut to exactly ``num_tasks`` tasks (edges to cut tasks dropped).
    Task ids are ``"0"``, ``"1"``, ...; device ids ``"d0"``, ``"d1"``, ....

Costs
    Each task has a base time (lognormal around ``mean_time_s``, times a per-kind
    factor: matrix products heavy, element-wise tasks light) and runs on device k
    in ``base / speed[k]``.  Memory per task is lognormal around
    ``mean_memory_bytes``; each edge carries lognormal bytes around
    ``mean_edge_bytes``.  Devices sit in nodes of ``devices_per_node``; a pair in
    one node has the intra-node latency and bandwidth, other pairs the inter-node
    ones, each pair with a random factor in ``[1 - link_jitter, 1 + link_jitter]``
    (symmetric).  The transfer time of edge e from a to b != a is
    ``alpha[a, b] + bytes[e] / bandwidth[a, b]``.

Memory
    Device k holds ``memory_slack * total task memory * r_k / sum(r)`` with ``r_k``
    random in [0.5, 1.5] (and at least the largest task), so memory binds when
    ``memory_slack`` is near 1; ``memory_slack=None`` leaves memory unbounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from milp_partition.errors import InputError
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, make_placement_problem

GraphKind = Literal["layered", "transformer", "inception"]
GRAPH_KINDS: tuple[str, ...] = ("layered", "transformer", "inception")


@dataclass(frozen=True)
class DeviceSetSettings:
    """The devices of a generated instance.

    Attributes
    ----------
    num_devices
        How many devices.
    speed_factors
        One speed per device (1 = reference); ``None``: random in
        ``[speed_min, speed_max]``.
    memory_slack
        Total capacity over total task memory; ``None`` for unbounded memory.
    """

    num_devices: int = 4
    speed_factors: tuple[float, ...] | None = None
    speed_min: float = 0.5
    speed_max: float = 2.0
    memory_slack: float | None = 1.5
    devices_per_node: int = 4
    intra_latency_s: float = 5e-6
    intra_bandwidth_bytes_per_s: float = 100e9
    inter_latency_s: float = 2e-5
    inter_bandwidth_bytes_per_s: float = 12.5e9
    link_jitter: float = 0.2


@dataclass(frozen=True)
class PlacementGeneratorSettings:
    """A generated instance: graph shape, costs, devices, seed.

    Attributes
    ----------
    kind
        ``"layered"``, ``"transformer"`` or ``"inception"``.
    num_tasks
        Exact number of tasks.
    """

    kind: GraphKind = "layered"
    num_tasks: int = 1000
    seed: int = 0
    width: int = 16
    max_fan_in: int = 3
    skip_probability: float = 0.1
    heads: int = 4
    branches: int = 4
    mean_time_s: float = 1e-3
    time_sigma: float = 0.8
    mean_memory_bytes: float = 64e6
    memory_sigma: float = 0.8
    mean_edge_bytes: float = 4e6
    edge_bytes_sigma: float = 1.0
    devices: DeviceSetSettings = field(default_factory=DeviceSetSettings)
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    def __post_init__(self) -> None:
        if self.kind not in GRAPH_KINDS:
            raise InputError(f"graph kind must be one of {', '.join(GRAPH_KINDS)}, got {self.kind!r}", where="kind")
        if self.num_tasks < 1:
            raise InputError(f"num_tasks must be at least 1, got {self.num_tasks}", where="num_tasks")
        if self.devices.num_devices < 1:
            raise InputError("num_devices must be at least 1", where="num_devices")
        if self.width < 1 or self.max_fan_in < 1 or self.heads < 1 or self.branches < 1:
            raise InputError("width, max_fan_in, heads and branches must be at least 1", where="generator settings")


def _layered(s: PlacementGeneratorSettings, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, w = s.num_tasks, s.width
    layer = np.arange(n) // w
    targets = np.flatnonzero(layer > 0)
    fan = rng.integers(1, s.max_fan_in + 1, size=len(targets))
    dst = np.repeat(targets, fan)
    src_layer = layer[dst] - 1
    skip = (rng.random(len(dst)) < s.skip_probability) & (src_layer >= 1)
    src_layer = src_layer - skip
    src = src_layer * w + rng.integers(0, w, size=len(dst))  # layers before the last are full
    key = np.unique(src * n + dst)
    kinds = np.zeros(n, dtype=np.int64)
    return key // n, key % n, kinds


def _tile(
    s: PlacementGeneratorSettings, t_src: np.ndarray, t_dst: np.ndarray, t_kind: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Repeat a block template (local indices, -1 = the previous block's output, its last task) and cut to n tasks."""
    n, size = s.num_tasks, len(t_kind)
    blocks = max(1, -(-(n - 1) // size))
    offset = (1 + np.arange(blocks) * size)[:, None]
    src = np.where(t_src[None, :] < 0, offset - 1, offset + t_src[None, :]).ravel()
    dst = (offset + t_dst[None, :]).ravel()
    keep = (src < n) & (dst < n)
    kinds = np.concatenate([[0], np.tile(t_kind, blocks)])[:n]
    return src[keep], dst[keep], kinds


# task kinds and their cost factors: 0 element-wise, 1 matrix product, 2 normalization / softmax, 3 concat
_TIME_FACTOR = np.array([0.3, 3.0, 0.6, 0.2])
_BYTES_FACTOR = np.array([1.0, 1.0, 1.0, 2.0])


def _transformer(s: PlacementGeneratorSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h = s.heads
    edges: list[tuple[int, int]] = []
    kinds = [2]  # 0: ln1
    ln1 = 0
    concat = 1 + 6 * h
    for j in range(h):
        q, k, v, sc, sm, ctx = (1 + 6 * j + x for x in range(6))
        kinds += [1, 1, 1, 1, 2, 1]
        edges += [(ln1, q), (ln1, k), (ln1, v), (q, sc), (k, sc), (sc, sm), (sm, ctx), (v, ctx), (ctx, concat)]
    proj, add1, ln2, up, act, down, add2 = range(concat + 1, concat + 8)
    kinds += [3, 1, 0, 2, 1, 0, 1, 0]
    edges += [(-1, ln1), (concat, proj), (proj, add1), (-1, add1), (add1, ln2), (ln2, up), (up, act), (act, down)]
    edges += [(down, add2), (add1, add2)]
    e = np.asarray(edges, dtype=np.int64)
    return _tile(s, e[:, 0], e[:, 1], np.asarray(kinds, dtype=np.int64))


def _inception(s: PlacementGeneratorSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    edges: list[tuple[int, int]] = []
    kinds: list[int] = []
    tails = []
    for b in range(s.branches):
        prev = -1
        for _ in range(1 + b % 3):
            node = len(kinds)
            kinds.append(1)
            edges.append((prev, node))
            prev = node
        tails.append(prev)
    concat = len(kinds)
    kinds.append(3)
    edges += [(t, concat) for t in tails]
    e = np.asarray(edges, dtype=np.int64)
    return _tile(s, e[:, 0], e[:, 1], np.asarray(kinds, dtype=np.int64))


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, size: int) -> np.ndarray:
    """Lognormal samples with the given mean."""
    return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size=size)


def generate_placement_problem(settings: PlacementGeneratorSettings | None = None) -> PlacementProblem:
    """Build a seeded synthetic :class:`PlacementProblem` (see the module docstring).

    The same settings always give the same instance.  Times are in seconds and
    memory in bytes.
    """
    s = settings or PlacementGeneratorSettings()
    rng = np.random.default_rng(s.seed)
    if s.kind == "layered":
        src, dst, kinds = _layered(s, rng)
    elif s.kind == "transformer":
        src, dst, kinds = _transformer(s)
    else:
        src, dst, kinds = _inception(s)
    n, m = s.num_tasks, len(src)
    dv = s.devices
    d = dv.num_devices
    if dv.speed_factors is not None:
        if len(dv.speed_factors) != d:
            raise InputError(f"need one speed factor per device ({d}), got {len(dv.speed_factors)}", where="speed_factors")
        speed = np.asarray(dv.speed_factors, dtype=np.float64)
        if (speed <= 0).any():
            raise InputError("speed factors must be positive", where="speed_factors")
    else:
        speed = rng.uniform(dv.speed_min, dv.speed_max, size=d)
    base = _TIME_FACTOR[kinds] * _lognormal(rng, s.mean_time_s, s.time_sigma, n)
    time = base[:, None] / speed[None, :]
    memory = _lognormal(rng, s.mean_memory_bytes, s.memory_sigma, n)
    if dv.memory_slack is None:
        capacity = np.full(d, np.inf)
    else:
        r = rng.uniform(0.5, 1.5, size=d)
        capacity = np.maximum(dv.memory_slack * memory.sum() * r / r.sum(), memory.max())
    node_of = np.arange(d) // max(dv.devices_per_node, 1)
    same = node_of[:, None] == node_of[None, :]
    jitter = rng.uniform(1 - dv.link_jitter, 1 + dv.link_jitter, size=(d, d))
    jitter = np.triu(jitter) + np.triu(jitter, 1).T
    alpha = np.where(same, dv.intra_latency_s, dv.inter_latency_s) * jitter
    bandwidth = np.where(same, dv.intra_bandwidth_bytes_per_s, dv.inter_bandwidth_bytes_per_s) / jitter
    nbytes = _BYTES_FACTOR[kinds[src]] * _lognormal(rng, s.mean_edge_bytes, s.edge_bytes_sigma, m)
    comm = alpha[None, :, :] + nbytes[:, None, None] / bandwidth[None, :, :]
    comm[:, np.arange(d), np.arange(d)] = 0.0
    ids = [str(i) for i in range(n)]
    return make_placement_problem(
        ids,
        [f"d{k}" for k in range(d)],
        time,
        memory,
        capacity,
        list(zip([ids[i] for i in src.tolist()], [ids[i] for i in dst.tolist()])),
        comm,
        name=f"{s.kind}-n{n}-d{d}-s{s.seed}",
        time_unit="s",
        memory_unit="B",
        settings=s.placement,
        source=f"generated ({s.kind}, seed {s.seed})",
    )
