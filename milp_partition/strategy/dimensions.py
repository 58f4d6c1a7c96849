"""What each split factor of a strategy configuration splits: the names of a layer's domain dimensions.

A configuration such as ``2x1x4`` gives one split factor per dimension of the layer's
iteration domain; the order is the layer's own.  Layers generated from shapes
(:func:`milp_partition.strategy.layers.generate_strategy_problem`) record their
dimensions in ``problem.extra["dimensions"]``; PaSE's tables name each layer by op
type and domain (``Conv(dom=128x3x55x55x11x11x96)``), whose layouts
:mod:`milp_partition.strategy.memory` documents.  A dimension whose meaning the name
does not tell is ``axis K`` (``batch`` for axis 0 of an elementwise op).
"""

from __future__ import annotations

from collections.abc import Mapping

from milp_partition.strategy.memory import parse_layer_name
from milp_partition.strategy.problem import StrategyProblem

#: Words for the short dimension names of layers generated from shapes.
WORDS: Mapping[str, str] = {
    "b": "batch",
    "n_in": "in features",
    "n_out": "out features",
    "c_in": "in channels",
    "c_out": "out channels",
    "h": "height",
    "w": "width",
    "r": "kernel height",
    "s": "kernel width",
    "heads": "heads",
    "seq": "sequence",
    "d_head": "head dim",
    "vocab": "vocabulary",
    "d": "embedding dim",
    "n": "features",
}

_CNN = ("batch", "channels", "height", "width")


def _generic(rank: int) -> tuple[str, ...]:
    return ("batch", *(f"axis {k}" for k in range(1, rank)))


def pase_dimension_names(op: str, rank: int) -> tuple[str, ...]:
    """Names of the ``rank`` domain dimensions of a PaSE layer of op type ``op`` (``axis K`` where unknown)."""
    if op == "Conv" and rank == 7:
        return ("batch", "in channels", "height", "width", "kernel height", "kernel width", "out channels")
    if op == "FC" and rank >= 3:
        return ("batch", *(f"batch axis {k}" for k in range(1, rank - 2)), "out features", "in features")
    if op == "Einsum" and rank == 4:
        return ("batch", "sequence", "out features", "in features")
    if op == "Einsum" and rank == 6:
        return ("Q/K/V", "batch", "heads", "sequence", "head dim", "model dim")
    if op == "Einsum" and rank == 5:
        # projection (b, l, e, h, k) or attention (b, h, l, m, k) / (b, h, l, k, m): told apart by the sizes only
        return ("batch", "axis 1", "axis 2", "axis 3", "axis 4")
    if op == "LSTM" and rank == 5:
        return ("layers", "sequence", "batch", "units", "in units")
    if op in ("Norm", "Pooling", "ReduceMean", "Concat") and rank == 4:
        return _CNN
    if op == "Norm" and rank in (2, 3):
        return ("batch", *(f"axis {k}" for k in range(1, rank - 1)), "features")
    return _generic(rank)


def _einsum5(domain: tuple[int, ...]) -> tuple[str, ...]:
    if domain[2] == domain[3] * domain[4]:
        return ("batch", "sequence", "model dim", "heads", "head dim")
    if domain[2] == domain[3]:
        return ("batch", "heads", "query sequence", "key sequence", "head dim")
    if domain[2] == domain[4]:
        return ("batch", "heads", "query sequence", "head dim", "key sequence")
    return _generic(5)


def dimension_names(problem: StrategyProblem) -> dict[str, list[str]]:
    """Layer id -> the name of each dimension its configurations split (one per factor of a configuration name)."""
    recorded = problem.extra.get("dimensions")
    out: dict[str, list[str]] = {}
    for node in problem.nodes:
        rank = len(node.configs[0].split("x")) if node.configs else 0
        if isinstance(recorded, Mapping) and node.id in recorded:
            names = [WORDS.get(str(d), str(d)) for d in recorded[node.id]]
        else:
            parsed = parse_layer_name(node.name)
            if parsed is not None and len(parsed[1]) == rank:
                op, domain = parsed
                names = list(_einsum5(domain) if op == "Einsum" and rank == 5 else pase_dimension_names(op, rank))
            else:
                names = [f"axis {k}" for k in range(rank)]
        out[node.id] = names if len(names) == rank else [f"axis {k}" for k in range(rank)]
    return out
