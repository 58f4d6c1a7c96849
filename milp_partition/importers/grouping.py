"""Operator and layer granularity: which graph node each captured operator belongs to."""

from __future__ import annotations

from milp_partition.importers.records import OpRecord

#: Node id of operators called from the top-level module's own ``forward``.
TOP_LEVEL = "top"


def layer_key(module_path: str, depth: int) -> str:
    """The module path cut to ``depth`` components (``"h.3.attn"``, 2 -> ``"h.3"``); ``"top"`` for ``""``."""
    if not module_path:
        return TOP_LEVEL
    return ".".join(module_path.split(".")[: max(depth, 1)])


def group_operators(ops: tuple[OpRecord, ...], granularity: str, depth: int) -> list[tuple[str, list[OpRecord]]]:
    """Split operators (in execution order) into graph nodes.

    Parameters
    ----------
    ops
        Operators in a topological order.
    granularity
        ``"operator"``: one group per operator, named by its id.  ``"layer"``: one group per
        maximal run of consecutive operators with the same :func:`layer_key`.
    depth
        Module-path depth of a layer.

    Returns
    -------
    list of (group id, operators)
        In order.  Because each group is a run of one topological order, every edge between
        groups goes forward in that order, so the grouped graph is acyclic.  A module run twice
        (or interrupted) gives groups ``key``, ``key#2``, ...
    """
    if granularity == "operator":
        return [(op.id, [op]) for op in ops]
    if granularity != "layer":
        raise ValueError(f"granularity must be 'operator' or 'layer', got {granularity!r}")
    groups: list[tuple[str, list[OpRecord]]] = []
    seen: dict[str, int] = {}
    last_key: str | None = None
    for op in ops:
        key = layer_key(op.module_path, depth)
        if key != last_key:
            seen[key] = seen.get(key, 0) + 1
            groups.append((key if seen[key] == 1 else f"{key}#{seen[key]}", []))
            last_key = key
        groups[-1][1].append(op)
    return groups


def path_depth(module_path: str) -> int:
    """Number of components of a module path (0 for the top level)."""
    return len(module_path.split(".")) if module_path else 0


def choose_layer_depth(ops: tuple[OpRecord, ...], max_share: float = 0.25) -> int:
    """The shallowest layer depth at which no node that could still be split holds more than ``max_share`` of the FLOPs.

    For d = 1, 2, ... the operators are grouped at depth d (:func:`group_operators`); d is taken
    when every group above ``max_share`` of the forward FLOPs is indivisible (all its operators
    sit at depth <= d, e.g. one large ``lm_head``).  In a transformer this is the depth at which
    the repeated blocks (``transformer.h.3``, ``bert.encoder.layer.3``) become nodes.  Without
    FLOPs, depth 1; at worst the deepest module path.
    """
    total = sum(op.forward_flops for op in ops)
    deepest = max((path_depth(op.module_path) for op in ops), default=1)
    if total <= 0:
        return 1
    for depth in range(1, max(deepest, 1) + 1):
        if all(
            sum(op.forward_flops for op in group) <= max_share * total or all(path_depth(op.module_path) <= depth for op in group)
            for _, group in group_operators(ops, "layer", depth)
        ):
            return depth
    return max(deepest, 1)
