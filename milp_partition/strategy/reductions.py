r"""Reductions of the layer-wise strategy problem that keep its optimum.

The problem (:mod:`milp_partition.strategy.problem`): pick one configuration :math:`c_v`
per layer to minimize

.. math::

    F(c) = \sum_v a_v(c_v) + \sum_{(u,v) \in E} B_{uv}(c_u, c_v),

optionally subject to :math:`\sum_v m_v(c_v) \le M`.  Each reduction below maps
the problem to a smaller one together with a *lift* that turns any solution
:math:`c'` of the reduced problem into a solution :math:`c` of the original with
:math:`F(c) = F'(c')` (up to float rounding) and the same memory or less, and
every original solution is matched by a reduced one at least as good, so optima
agree and an optimal reduced solution lifts to an optimal original one.

Normalization
    A self-loop :math:`(v, v)` adds :math:`B_{vv}(i, i)` to :math:`a_v(i)`;
    parallel edges, in either direction, are summed into the first of them
    (transposed when reversed).  Every assignment keeps its cost.
Dominance (:func:`drop_dominated`)
    Configuration a of v is dominated by b when :math:`a_v(b) \le a_v(a)`,
    :math:`B_{vu}(b, \cdot) \le B_{vu}(a, \cdot)` elementwise for every
    neighbour u (the row, or the column when v is the target), and, when a
    memory limit is in force, :math:`m_v(b) \le m_v(a)`.  Replacing a by b in
    any solution costs no more (and needs no more memory), so a can go.  Of
    configurations identical in all these numbers one is kept.  Removing rows
    changes the neighbours' vectors, so this runs to a fixpoint (Alpa and PaSE
    prune identical strategies the same way; dominance is the classical
    "dead-end elimination" rule of min-sum problems, Desmet et al., Nature 1992).
Series merge (:func:`merge_chains`)
    A layer w whose edges go to exactly two other layers u and v (one in-edge and
    one out-edge, or any other orientation) is eliminated exactly:

    .. math::

        B'_{uv}(i, k) = \min_j \big(B_{uw}(i, j) + a_w(j) + B_{wv}(j, k)\big),
        \qquad J(i, k) = \operatorname{arg\,min}_j (\dots),

    added into an existing edge between u and v, or as a new edge (u, v).  The
    lift sets :math:`c_w = J(c_u, c_v)`.  This is one step of variable
    elimination (Bertelè and Brioschi, *Nonserial Dynamic Programming*, 1972).
Leaf fold (:func:`fold_leaves`)
    A layer w whose edges all go to one other layer u is eliminated into u:
    :math:`a'_u(i) = a_u(i) + \min_j (B_{uw}(i, j) + a_w(j))`, lift
    :math:`c_w = J(c_u)`.

Merges and folds are skipped when a memory limit is in force: the memory of the
eliminated layer would depend on a choice the reduced problem no longer sees.
Dominance alone then applies, with memory as one more coordinate.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution

#: A series merge is skipped when its ``k_u * k_w * k_v`` work table would exceed this many entries.
MAX_MERGE_ENTRIES = 20_000_000


@dataclass(frozen=True, eq=False)
class Elimination:
    """One eliminated layer and how to recover its configuration.

    Attributes
    ----------
    node
        Id of the eliminated layer.
    configs
        Its configurations when it was eliminated (a subset of the original ones).
    neighbours
        The one (leaf fold) or two (series merge) layers it was eliminated into.
    neighbour_configs
        Their configurations at that moment, in the axis order of ``argmin``.
    argmin
        Index into ``configs`` of the best configuration for each configuration of
        the neighbours: shape ``(k_u,)`` or ``(k_u, k_v)``.
    """

    node: str
    configs: tuple[str, ...]
    neighbours: tuple[str, ...]
    neighbour_configs: tuple[tuple[str, ...], ...]
    argmin: np.ndarray


@dataclass(frozen=True, eq=False)
class Reduced:
    """A reduced problem and the way back to the original.

    Attributes
    ----------
    problem
        The reduced problem: surviving layers (original ids and config names, in
        the original order) and edges.
    original
        The problem it came from.
    eliminations
        Merged or folded layers, in the order they were eliminated.
    configs_dropped
        Configurations removed by dominance.
    nodes_merged, leaves_folded
        Layers removed by series merges and by leaf folds.
    edges_combined
        Self-loops and parallel edges folded away by normalization.
    notes
        Remarks (e.g. that a memory limit kept merges off).
    """

    problem: StrategyProblem
    original: StrategyProblem
    eliminations: tuple[Elimination, ...] = ()
    configs_dropped: int = 0
    nodes_merged: int = 0
    leaves_folded: int = 0
    edges_combined: int = 0
    notes: tuple[str, ...] = ()

    def lift(self, solution: StrategySolution) -> StrategySolution:
        """Map a solution of :attr:`problem` to one of :attr:`original` of the same objective.

        Surviving layers keep their configuration (names are the original ones);
        eliminated layers are filled in reverse order of elimination from their
        recorded argmin tables, so every neighbour is known when it is needed.

        Raises
        ------
        ValueError
            When ``solution`` misses a layer of the reduced problem or names a
            configuration the reduced problem does not have.
        """
        choice = dict(solution.choice)
        for node in self.problem.nodes:
            if choice.get(node.id) not in node.configs:
                raise ValueError(f"the solution gives layer {node.id!r} no configuration of the reduced problem")
        for elim in reversed(self.eliminations):
            index = tuple(names.index(choice[nb]) for nb, names in zip(elim.neighbours, elim.neighbour_configs, strict=True))
            choice[elim.node] = elim.configs[int(elim.argmin[index])]
        return StrategySolution({n.id: choice[n.id] for n in self.original.nodes})

    def summary(self) -> str:
        """One line: what was removed, and the size before and after."""
        before, after = self.original, self.problem
        parts = [
            f"{len(before.nodes)} -> {len(after.nodes)} layers",
            f"{before.total_configs} -> {after.total_configs} configurations",
            f"{len(before.edges)} -> {len(after.edges)} edges",
            f"{self.configs_dropped} configurations dominated",
            f"{self.nodes_merged} series merges",
            f"{self.leaves_folded} leaves folded",
        ]
        if self.edges_combined:
            parts.append(f"{self.edges_combined} self-loops or parallel edges combined")
        return "; ".join([*parts, *self.notes])


# --------------------------------------------------------------------------- mutable working copy


@dataclass
class _Layer:
    configs: list[str]
    cost: np.ndarray
    memory: np.ndarray | None
    activation: np.ndarray | None = None


@dataclass
class _Work:
    """Mutable copy local to one call: layers by id, one matrix per unordered pair (oriented by its key)."""

    original: StrategyProblem
    layers: dict[str, _Layer]
    edges: dict[tuple[str, str], np.ndarray]
    adjacent: dict[str, set[str]]
    memory_in_force: bool
    eliminations: list[Elimination] = field(default_factory=list)
    configs_dropped: int = 0
    nodes_merged: int = 0
    leaves_folded: int = 0
    edges_combined: int = 0
    notes: list[str] = field(default_factory=list)

    def matrix(self, a: str, b: str) -> np.ndarray:
        """``B_ab`` with rows for a's configurations, columns for b's."""
        if (a, b) in self.edges:
            return self.edges[(a, b)]
        return self.edges[(b, a)].T

    def add_matrix(self, a: str, b: str, m: np.ndarray) -> None:
        """Add ``m`` (rows a, columns b) into the edge between a and b, creating ``(a, b)`` if none."""
        if (a, b) in self.edges:
            self.edges[(a, b)] = self.edges[(a, b)] + m
        elif (b, a) in self.edges:
            self.edges[(b, a)] = self.edges[(b, a)] + m.T
        else:
            self.edges[(a, b)] = np.array(m, dtype=np.float64)
            self.adjacent[a].add(b)
            self.adjacent[b].add(a)

    def remove_layer(self, w: str) -> None:
        for u in self.adjacent.pop(w):
            self.adjacent[u].discard(w)
            self.edges.pop((u, w), None)
            self.edges.pop((w, u), None)
        del self.layers[w]


def _start(problem: StrategyProblem) -> _Work:
    """Working copy with self-loops folded into node costs and parallel edges summed."""
    layers = {
        n.id: _Layer(
            list(n.configs),
            np.asarray(n.cost, dtype=np.float64).copy(),
            None if n.memory_bytes is None else np.asarray(n.memory_bytes, dtype=np.float64).copy(),
            None if n.activation_bytes is None else np.asarray(n.activation_bytes, dtype=np.float64).copy(),
        )
        for n in problem.nodes
    }
    work = _Work(problem, layers, {}, {v: set() for v in layers}, problem.memory_limit_bytes is not None)
    for e in problem.edges:
        m = np.asarray(e.cost, dtype=np.float64)
        if e.source == e.target:
            layers[e.source].cost = layers[e.source].cost + np.diagonal(m)
            work.edges_combined += 1
            continue
        if (e.source, e.target) in work.edges or (e.target, e.source) in work.edges:
            work.edges_combined += 1
        work.add_matrix(e.source, e.target, m)
    return work


def _finish(work: _Work) -> Reduced:
    original = work.original
    nodes = []
    for n in original.nodes:
        layer = work.layers.get(n.id)
        if layer is None:
            continue
        nodes.append(StrategyNode(n.id, n.name, tuple(layer.configs), layer.cost, layer.memory, layer.activation))
    edges = tuple(StrategyEdge(a, b, m) for (a, b), m in work.edges.items())
    problem = StrategyProblem(
        nodes=tuple(nodes),
        edges=edges,
        name=original.name,
        cost_unit=original.cost_unit,
        source=original.source,
        cluster=original.cluster,
        extra=original.extra,
        memory_model=original.memory_model,
    )
    return Reduced(
        problem=problem,
        original=original,
        eliminations=tuple(work.eliminations),
        configs_dropped=work.configs_dropped,
        nodes_merged=work.nodes_merged,
        leaves_folded=work.leaves_folded,
        edges_combined=work.edges_combined,
        notes=tuple(work.notes),
    )


# --------------------------------------------------------------------------- dominance


def _features(work: _Work, v: str) -> np.ndarray:
    """One row per configuration of v: node cost, memory (when a limit is in force), every incident row."""
    layer = work.layers[v]
    cols = [layer.cost[:, None]]
    if work.memory_in_force and layer.memory is not None:
        cols.append(layer.memory[:, None])
        if layer.activation is not None:  # liveness: the resident part counts on its own at some steps
            cols.append((layer.memory - layer.activation)[:, None])
    cols.extend(work.matrix(v, u) for u in sorted(work.adjacent[v]))
    return np.concatenate(cols, axis=1)


def _undominated(features: np.ndarray) -> np.ndarray:
    r"""Mask of the configurations to keep: not strictly dominated, and first of identical ones.

    ``le[b, a]`` is :math:`f_b \le f_a` elementwise.  a goes when some b has
    ``le[b, a]`` and not ``le[a, b]`` (strict), or some earlier b is identical.
    Dominance is a preorder, so every removed a has a kept b with :math:`f_b \le f_a`.
    """
    k = features.shape[0]
    le = np.empty((k, k), dtype=bool)
    for b in range(k):
        le[b] = np.all(features[b] <= features, axis=1)
    strictly = le & ~le.T
    identical_earlier = np.tril(le & le.T, k=-1)  # [a, b] with b < a: entry (row a, col b)
    return np.logical_and(~strictly.any(axis=0), ~identical_earlier.any(axis=1))


def _restrict(work: _Work, v: str, keep: np.ndarray) -> None:
    layer = work.layers[v]
    layer.configs = [c for c, k in zip(layer.configs, keep.tolist(), strict=True) if k]
    layer.cost = layer.cost[keep]
    if layer.memory is not None:
        layer.memory = layer.memory[keep]
    if layer.activation is not None:
        layer.activation = layer.activation[keep]
    for u in work.adjacent[v]:
        if (v, u) in work.edges:
            work.edges[(v, u)] = work.edges[(v, u)][keep, :]
        else:
            work.edges[(u, v)] = work.edges[(u, v)][:, keep]


def _drop_pass(work: _Work) -> bool:
    """Remove dominated configurations until none is left; True when any was removed."""
    queue = list(work.layers)
    queued = set(queue)
    changed = False
    while queue:
        v = queue.pop()
        queued.discard(v)
        if v not in work.layers or len(work.layers[v].configs) <= 1:
            continue
        keep = _undominated(_features(work, v))
        if keep.all():
            continue
        work.configs_dropped += int((~keep).sum())
        _restrict(work, v, keep)
        changed = True
        for u in work.adjacent[v]:
            if u not in queued:
                queue.append(u)
                queued.add(u)
    return changed


# --------------------------------------------------------------------------- merges and folds


def _series_merge(work: _Work, w: str) -> bool:
    """Eliminate w (exactly two neighbours) into a matrix between them; False when it is too big."""
    u, v = _merge_ends(work, w)
    e1, e2 = work.matrix(u, w), work.matrix(w, v)
    cost_w = work.layers[w].cost
    if e1.shape[0] * cost_w.size * e2.shape[1] > MAX_MERGE_ENTRIES:
        return False
    total = e1[:, :, None] + cost_w[None, :, None] + e2[None, :, :]
    best = np.argmin(total, axis=1)
    merged = np.take_along_axis(total, best[:, None, :], axis=1)[:, 0, :]
    _record(work, w, (u, v), best)
    work.remove_layer(w)
    work.add_matrix(u, v, merged)
    work.nodes_merged += 1
    return True


def _merge_ends(work: _Work, w: str) -> tuple[str, str]:
    """The two neighbours of w, the one with an edge into w first (so one-in one-out gives edge (u, v))."""
    a, b = sorted(work.adjacent[w])
    return (b, a) if (b, w) in work.edges and (a, w) not in work.edges else (a, b)


def _leaf_fold(work: _Work, w: str) -> None:
    """Eliminate w (exactly one neighbour u) into u's node cost."""
    (u,) = work.adjacent[w]
    total = work.matrix(u, w) + work.layers[w].cost[None, :]
    best = np.argmin(total, axis=1)
    _record(work, w, (u,), best)
    work.remove_layer(w)
    work.layers[u].cost = work.layers[u].cost + total[np.arange(total.shape[0]), best]
    work.leaves_folded += 1


def _record(work: _Work, w: str, neighbours: tuple[str, ...], best: np.ndarray) -> None:
    work.eliminations.append(
        Elimination(
            node=w,
            configs=tuple(work.layers[w].configs),
            neighbours=neighbours,
            neighbour_configs=tuple(tuple(work.layers[n].configs) for n in neighbours),
            argmin=best.astype(np.int32),
        )
    )


def _merge_pass(work: _Work, *, series: bool, leaves: bool) -> bool:
    """Eliminate degree-2 (series) and degree-1 (leaf) layers until none is left; True when any was."""
    if work.memory_in_force:
        return False
    queue = deque(work.layers)
    queued = set(queue)
    changed = False
    while queue:
        w = queue.popleft()
        queued.discard(w)
        if w not in work.layers:
            continue
        degree = len(work.adjacent[w])
        neighbours = list(work.adjacent[w])
        if degree == 2 and series:
            done = _series_merge(work, w)
        elif degree == 1 and leaves:
            _leaf_fold(work, w)
            done = True
        else:
            done = False
        if done:
            changed = True
            for u in neighbours:
                if u not in queued:
                    queue.append(u)
                    queued.add(u)
    return changed


def _memory_note(work: _Work) -> None:
    if work.memory_in_force:
        work.notes.append("memory limit in force: merges and leaf folds skipped, memory counted in dominance")


# --------------------------------------------------------------------------- public


def drop_dominated(problem: StrategyProblem) -> Reduced:
    r"""Remove dominated configurations, to a fixpoint.

    Configuration a of layer v goes when another configuration b has
    :math:`a_v(b) \le a_v(a)`, :math:`B_{vu}(b, \cdot) \le B_{vu}(a, \cdot)` for
    every neighbour u and, under a memory limit, :math:`m_v(b) \le m_v(a)`
    (memory is ignored when no limit is in force: it then plays no part in the
    problem).  Self-loops and parallel edges are first combined (see the module
    docstring).

    Returns
    -------
    Reduced
        With :attr:`Reduced.lift` mapping names unchanged (no layer is eliminated).
    """
    work = _start(problem)
    _drop_pass(work)
    _memory_note(work)
    return _finish(work)


def merge_chains(problem: StrategyProblem) -> Reduced:
    r"""Eliminate every layer with exactly two neighbours, to a fixpoint.

    A layer w with one in-edge (u, w) and one out-edge (w, v) (or edges to two
    distinct layers in any orientation) becomes
    :math:`B'_{uv}(i, k) = \min_j (B_{uw}(i, j) + a_w(j) + B_{wv}(j, k))`, added
    into an existing edge between u and v or as a new edge (u, v); the argmin is
    kept for :meth:`Reduced.lift`.  With a memory limit in force nothing is
    merged (w's memory would depend on a choice the reduced problem cannot see).
    A merge whose table :math:`k_u k_w k_v` exceeds :data:`MAX_MERGE_ENTRIES` is skipped.
    """
    work = _start(problem)
    _merge_pass(work, series=True, leaves=False)
    _memory_note(work)
    return _finish(work)


def fold_leaves(problem: StrategyProblem) -> Reduced:
    r"""Eliminate every layer with exactly one neighbour u into u's node cost, to a fixpoint.

    :math:`a'_u(i) = a_u(i) + \min_j (B_{uw}(i, j) + a_w(j))`.  Skipped under a
    memory limit, like :func:`merge_chains`.
    """
    work = _start(problem)
    _merge_pass(work, series=False, leaves=True)
    _memory_note(work)
    return _finish(work)


def reduce(problem: StrategyProblem, *, leaves: bool = True) -> Reduced:
    """Apply :func:`drop_dominated`, :func:`merge_chains` and (with ``leaves``) :func:`fold_leaves` to a fixpoint.

    Each round removes dominated configurations, then eliminates layers of one or
    two neighbours; merges change the remaining matrices and node costs, which
    can make more configurations dominated, so rounds repeat until nothing changes.
    Under a memory limit only dominance applies.
    """
    work = _start(problem)
    while True:
        dropped = _drop_pass(work)
        merged = _merge_pass(work, series=True, leaves=leaves)
        if not (dropped or merged):
            break
    _memory_note(work)
    return _finish(work)


def edge_entries(problem: StrategyProblem) -> int:
    """Total number of entries of the edge matrices (the edge variables of a one-hot model)."""
    return sum(math.prod(np.shape(e.cost)) for e in problem.edges)
