"""Seeded synthetic graphs for scaling studies and tests.

``inception_like`` builds the wide graphs on which ideal-enumerating DPs explode:
a stem, then blocks of ``branches`` parallel chains (each 1 to ``max_depth`` layers)
joined by a concatenation, like the Inception family (Szegedy et al., CVPR 2016).
Times and sizes are drawn from ranges typical of GPU layer profiles (milliseconds,
bytes); the same seed gives the same graph.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from milp_partition.graph import Edge, Graph, Node, make_graph


@dataclass(frozen=True)
class InceptionLikeSettings:
    """Shape and cost ranges of :func:`inception_like`.

    Attributes
    ----------
    blocks, branches, max_depth
        Number of blocks, parallel branches per block, and layers per branch (1..max_depth).
    time_ms_range
        Range of a layer's forward time.
    activation_bytes_range, param_bytes_range
        Ranges of a layer's output and parameter bytes.
    bandwidth_bytes_per_ms
        Used to give each edge a transfer time (bytes / bandwidth).
    """

    blocks: int = 10
    branches: int = 4
    max_depth: int = 3
    time_ms_range: tuple[float, float] = (0.05, 1.5)
    activation_bytes_range: tuple[int, int] = (2**20, 2**24)
    param_bytes_range: tuple[int, int] = (0, 2**22)
    bandwidth_bytes_per_ms: float = 1.2e7


def inception_like(seed: int, settings: InceptionLikeSettings = InceptionLikeSettings()) -> Graph:
    """A seeded Inception-like layer graph (see the module docstring)."""
    rng = random.Random(seed)
    nodes: list[Node] = []
    edges: list[tuple[str, str]] = []

    def layer(name: str, op: str) -> str:
        node_id = f"n{len(nodes)}"
        nodes.append(
            Node(
                id=node_id,
                name=name,
                op_type=op,
                forward_time=round(rng.uniform(*settings.time_ms_range), 4),
                param_bytes=rng.randint(*settings.param_bytes_range) if op == "Conv2d" else 0,
                activation_bytes=rng.randint(*settings.activation_bytes_range),
            )
        )
        return node_id

    prev = layer("stem", "Conv2d")
    for b in range(settings.blocks):
        tails = []
        for br in range(settings.branches):
            head = prev
            for d in range(rng.randint(1, settings.max_depth)):
                cur = layer(f"block{b}.branch{br}.conv{d}", "Conv2d")
                edges.append((head, cur))
                head = cur
            tails.append(head)
        concat = layer(f"block{b}.concat", "Concat")
        edges.extend((t, concat) for t in tails)
        prev = concat
    by_id = {n.id: n for n in nodes}
    return make_graph(
        nodes,
        [
            Edge(
                a,
                b,
                bytes=by_id[a].activation_bytes,
                transfer_time=round(by_id[a].activation_bytes / settings.bandwidth_bytes_per_ms, 4),
            )
            for a, b in edges
        ],
        name=f"inception_like_s{seed}_b{settings.blocks}",
        time_unit="ms",
    )
