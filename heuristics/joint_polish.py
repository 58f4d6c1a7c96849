r"""A plan polisher for the joint problem: local search from a verified plan to a better one.

:func:`polish` takes a plan of a :class:`~milp_partition.joint.problem.JointProblem` (any heuristic's, verified)
and improves it by local search.  The search state is the stages' node sets in pipeline order and each stage's
data- and tensor-parallel degrees ``(d, t)``; a stage's configurations are never part of the state: for its node
set, ``d``, ``t`` and micro-batches in flight ``y = ceil(s / d)`` they are chosen optimally, the two-resource
choice (seconds, bytes) being a multiple-choice knapsack solved exactly
(:func:`~milp_partition.joint.knapsack.min_cost_enumerate` where the nodes whose choice matters are few, else
:func:`~milp_partition.joint.knapsack.min_cost_exact`; a configuration's sync bytes on the edges that cross the
stage's boundary and its all-reduce term are folded into its seconds, so the choice is separable per node).
Enumerating took the knapsacks from 380 to 45 microseconds a call on six branches of eight at k = 16 (12 s of
polishing: 14,638 knapsacks in 5.6 s before, 22,206 in 1.0 s after).  The group splits' branch and bound runs in C
where the extension is built (``heuristics/_groupsplit.c``; the same search, tested against this module's): on the
same 12 s, 10,280 group splits took 7.6 s in Python, 23,250 took 1.8 s in C, and the plan reached 8.571 ms instead
of 8.651.  A stage's least time is the joint DP's exact knapsack in C where built
(:func:`~milp_partition.joint.native.least_cost`, the same value); the configurations themselves are chosen in
Python, only for the plan handed back: the same run then reached 8.571 ms in 9.5 s (30,031 group splits), where
the kicks ran out.

Neighbourhood, tried in this order, each move's plan scored in full:

1. *Node moves*: a node ``v`` of stage ``i`` together with its descendants inside stage ``i`` (its down-closure
   there) goes to a later stage ``j``, or ``v`` with its ancestors inside stage ``i`` goes to an earlier one,
   wherever every edge still goes forward (so every stage stays an ideal difference of the DAG); the stage left
   empty is dropped.  Degrees unchanged.  Moves out of the slowest stages are tried first; the first improving
   move is taken (first improvement).
2. *Group splits*: for two stages (every pair), then three, then four (those with the slowest stage), slowest groups
   first, the best redistribution of their nodes among them with everything else fixed: the split whose slowest
   stage of the group is fastest, found by a branch and bound over the nodes in topological order (each side's
   least seconds plus its cut edges so far bound it from below; at most :data:`GROUP_VISITS` nodes a group;
   compiled where built, see below).  It holds every exchange of closures between the stages, which no single node
   move makes.  Groups of four (50,000 nodes each) came with the compiled search: from the same three starts and
   three seeds, ten seconds each, the mean plan went 9.143 -> 9.122 ms on seven branches of seven at k = 16,
   8.955 -> 8.921 on eight of six, 8.608 -> 8.609 on six of eight.
3. *Degrees*: for the current node sets, every stage's ``(d, t)`` re-chosen by an exact DP from the last stage
   to the first over (devices used, ``s``) minimising the largest stage time (``d`` divides ``N``,
   ``sum d t <= k``, ``sum d <= N``, a forced shape respected).
4. *Merges and splits*: two adjacent stages merged, or the slowest stage split in two (the down-closure of one of
   its nodes after the rest), each followed by the degree DP (skipped where the shape forces the stage count).
5. *Stage reorders* (tried after the node moves): one stage, its nodes and degrees, moved to another place in the
   pipeline wherever every edge still goes forward (parallel branches' stages that share no branch swap freely).
   The stages it passes and the stage itself change their micro-batches in flight ``y = ceil(s / d)``, so their
   memory and the configurations that fit: a ``d = 1`` stage early holds many micro-batches and may need
   recomputation where later it would not.  No other move changes a stage's place without its nodes; from the same
   starts (ten seconds each, 9-18 runs of seeds and starts) it lowered the polisher's mean plan by 0.6-1% on three
   wide graphs at k = 16 (seven of six: 7.627 to 7.559 ms; ten of four: 7.311 to 7.241).

Acceptance: a move is taken when it makes the plan's stage times, sorted slowest first, lexicographically smaller
(each time rounded to 12 significant digits): the largest time drops, or it stays and the number of stages at it
drops, or those stay and the next one drops, and so on.  The order is strict and total, so the search never
cycles; at a local optimum of all five neighbourhoods, time left goes to kicks (:data:`KICK_MOVES` random node
moves from the best plan met, then the search again; a seeded random generator), until the budget is spent or
:data:`FRUITLESS_KICKS` kicks in a row found nothing better.  The plan handed back is re-checked by
:func:`~milp_partition.verifiers.joint.verify_joint`, and replaces the input only when the verifier's objective is
strictly smaller.  A group split lowers its group's slowest stage, so the plan's key drops with it.
:func:`polish_starts` runs the search from several plans (local optima differ by start).  A heuristic: its plans
prove nothing about the optimum.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence

import numpy as np

from milp_partition.budget import Budget
from milp_partition.joint import native
from milp_partition.joint.knapsack import cost_bounds, min_cost_enumerate, min_cost_exact
from milp_partition.joint.problem import JointPlan, JointProblem, JointStage
from milp_partition.verifiers.joint import verify_joint

try:  # the group split's branch and bound, compiled (optional: see setup.py; the Python one is the same search)
    from milp_partition.heuristics import _groupsplit as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _native = None

#: nodes of the branch and bound per group of 2, 3 and 4 stages (a larger group's search is cut there)
GROUP_VISITS = {2: 200_000, 3: 200_000, 4: 50_000}

#: random node moves of one kick, and kicks in a row without a better plan before the search stops (:func:`_kicks`)
KICK_MOVES = 3
FRUITLESS_KICKS = 30

#: a stage of the search: its nodes (indices), data-parallel degree, tensor-parallel degree
Stage = tuple[frozenset[int], int, int]


class _Model:
    """The problem's arrays and a cache of the best time of a (stage nodes, ``d``, ``t``, ``y``)."""

    def __init__(self, problem: JointProblem) -> None:
        self.problem = problem
        self.ids = [nd.id for nd in problem.nodes]
        index = {v: q for q, v in enumerate(self.ids)}
        n = len(self.ids)
        self.preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self.succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for e in problem.edges:
            self.preds[index[e.target]].append((index[e.source], e.bytes))
            self.succs[index[e.source]].append((index[e.target], e.bytes))
        cl = problem.cluster
        shape = problem.shape
        self.degrees = [t for t in problem.degrees if shape is None or shape.tensor_parallel in (None, t)]
        self.divisors = [
            d
            for d in range(1, min(cl.device_count, problem.microbatches) + 1)
            if problem.microbatches % d == 0 and (shape is None or shape.data_parallel in (None, d))
        ]
        self.arrays: dict[int, tuple[np.ndarray, ...]] = {}
        self.names: dict[int, list[list[str]]] = {}
        self.sync: dict[int, tuple[list[list[dict[int, float]]], list[list[dict[int, float]]]]] = {}
        for t in problem.degrees:
            width = max(len(nd.configs[t]) for nd in problem.nodes)
            arrs = tuple(np.full((n, width), np.inf) for _ in range(4))
            for v, nd in enumerate(problem.nodes):
                for j, c in enumerate(nd.configs[t]):
                    for arr, x in zip(arrs, (c.time_per_sample_s, c.parameter_bytes, c.activation_bytes, c.fixed_bytes)):
                        arr[v, j] = x
            self.arrays[t] = arrs
            self.names[t] = [[c.id for c in nd.configs[t]] for nd in problem.nodes]
            self.sync[t] = (
                [[{index[u]: x for u, x in c.sync_fw_bytes.items()} for c in nd.configs[t]] for nd in problem.nodes],
                [[{index[u]: x for u, x in c.sync_bw_bytes.items()} for c in nd.configs[t]] for nd in problem.nodes],
            )
        self.cache: dict[tuple[frozenset[int], int, int, int], float] = {}
        self.floors: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.lowers: dict[tuple[frozenset[int], int, int, int], float] = {}

    def stage(self, nodes: frozenset[int], d: int, t: int, y: int) -> float:
        """The stage's least time per sample; ``inf`` when nothing fits (the knapsack in C where it is built)."""
        key = (nodes, d, t, y)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._stage(nodes, d, t, y)
        return hit

    def lower(self, nodes: frozenset[int], d: int, t: int, y: int) -> float:
        """A lower bound of :meth:`stage` (the knapsack's LP relaxation, :func:`~milp_partition.joint.knapsack.cost_bounds`)."""
        key = (nodes, d, t, y)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        got = self.lowers.get(key)
        if got is None:
            cost, mem, crossing = self._knapsack(nodes, d, t, y)
            got = self.lowers[key] = cost_bounds(cost, mem, self.problem.memory_bytes)[0] + crossing
        return got

    def _stage(self, nodes: frozenset[int], d: int, t: int, y: int) -> float:
        if t not in self.arrays:
            return math.inf
        cost, mem, crossing = self._knapsack(nodes, d, t, y)
        value = native.least_cost(cost, mem, self.problem.memory_bytes)
        if value is None:
            value = self._solve(cost, mem)[0]
        return value + crossing if math.isfinite(value) else math.inf

    def choice(self, nodes: frozenset[int], d: int, t: int, y: int) -> tuple[int, ...]:
        """Each node's option (sorted node order) in a least-time choice of the stage; ``()`` when nothing fits."""
        if t not in self.arrays:
            return ()
        cost, mem, _ = self._knapsack(nodes, d, t, y)
        return self._solve(cost, mem)[1]

    def _solve(self, cost: np.ndarray, mem: np.ndarray) -> tuple[float, tuple[int, ...]]:
        """The knapsack's least seconds and each node's option (``inf`` and ``()`` when nothing fits)."""
        memory = self.problem.memory_bytes
        # a few nodes' choices are enumerated at once, more go to the Pareto DP (the same least time)
        got = min_cost_enumerate(cost, mem, memory)
        value, choice = got if got is not None else min_cost_exact(cost, mem, memory, choices=True)
        if not math.isfinite(value) or choice is None:
            return math.inf, ()
        return value, tuple(choice)

    def _knapsack(self, nodes: frozenset[int], d: int, t: int, y: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Each node's seconds and bytes per option (sorted node order) and the seconds of the crossing edges' bytes."""
        cl = self.problem.cluster
        rows = sorted(nodes)
        p, w, a, b = (arr[rows] for arr in self.arrays[t])
        avail = np.isfinite(p)
        bw_s = cl.bandwidth_bytes_per_s
        cost = np.where(avail, p / d + 4.0 * (d - 1) * np.where(avail, w, 0.0) / (d * self.problem.microbatches * bw_s), np.inf)
        mem = np.where(avail, a * y + b, np.inf)
        crossing = 0.0
        fw, bw = self.sync[t]
        for r, v in enumerate(rows):
            for links, sync in ((self.preds[v], fw[v]), (self.succs[v], bw[v])):
                for u, c in links:
                    if u in nodes:
                        continue
                    crossing += 2.0 * c
                    for j, extra in enumerate(sync):
                        cost[r, j] += 2.0 * extra.get(u, 0.0) / (d * bw_s)
        return cost, mem, crossing / (d * bw_s)

    def floor(self, d: int, t: int, y: int) -> tuple[np.ndarray, np.ndarray]:
        """Per node: its least seconds (no crossing terms) and least bytes for ``(d, t, y)`` (lower bounds of a stage's)."""
        key = (d, t, y)
        hit = self.floors.get(key)
        if hit is None:
            cl = self.problem.cluster
            p, w, a, b = self.arrays[t]
            avail = np.isfinite(p)
            scale = 4.0 * (d - 1) / (d * self.problem.microbatches * cl.bandwidth_bytes_per_s)
            cost = np.where(avail, p / d + scale * np.where(avail, w, 0.0), np.inf)
            hit = self.floors[key] = (cost.min(axis=1), np.where(avail, a * y + b, np.inf).min(axis=1))
        return hit

    def times(self, stages: Sequence[Stage]) -> list[float]:
        """Each stage's least time per sample (``y`` from the suffix sums of ``d``)."""
        out = []
        s = 0
        for nodes, d, t in reversed(stages):
            s += d
            out.append(self.stage(nodes, d, t, -(-s // d)))
        return out[::-1]

    def plan(self, stages: Sequence[Stage]) -> JointPlan:
        """The :class:`JointPlan` of the stages with each stage's best configurations."""
        out = []
        s = sum(d for _, d, _ in stages)
        for nodes, d, t in stages:
            choice = self.choice(nodes, d, t, -(-s // d))
            s -= d
            rows = sorted(nodes)
            configs = {self.ids[v]: self.names[t][v][j] for v, j in zip(rows, choice)}
            out.append(JointStage(tuple(self.ids[v] for v in rows), d, t, configs))
        return JointPlan(tuple(out))


def _key(times: Sequence[float]) -> tuple[float, ...]:
    """The acceptance order: stage times slowest first, rounded to 12 significant digits."""
    return tuple(sorted((float(f"{x:.12g}") for x in times), reverse=True))


class _Search:
    """The local search's state (stages in pipeline order) and its moves."""

    def __init__(self, model: _Model, stages: list[Stage], budget: Budget) -> None:
        self.model = model
        self.stages = stages
        self.budget = budget
        self.times = model.times(stages)
        self.key = _key(self.times)
        self.moves = 0
        self.topological = _topological(model)
        #: the shape forces the number of stages: no move may empty, merge or split one
        self.forced = model.problem.shape is not None and model.problem.shape.stages is not None

    def accept(self, stages: list[Stage], times: list[float] | None = None) -> bool:
        """Take ``stages`` when their key is smaller than the current one."""
        times = self.model.times(stages) if times is None else times
        key = _key(times)
        if key < self.key and math.isfinite(key[0]):
            self.stages, self.times, self.key = stages, times, key
            self.moves += 1
            return True
        return False

    def ys(self) -> list[int]:
        """Each stage's micro-batches in flight ``ceil(s / d)``."""
        out = []
        s = 0
        for _, d, _ in reversed(self.stages):
            s += d
            out.append(-(-s // d))
        return out[::-1]

    def group_splits(self, size: int) -> Iterator[list[Stage]]:
        """For groups of ``size`` stages, slowest groups first: the best split of their union among them (docstring, 2)."""
        groups = sorted(
            itertools.combinations(range(len(self.stages)), size),
            key=lambda g: sorted(-self.times[q] for q in g),
        )
        if size > 2:  # only the groups with the slowest stage
            slowest = max(range(len(self.stages)), key=lambda q: self.times[q])
            groups = [g for g in groups if slowest in g]
        for group in groups:
            found = _GroupSplit(self, group, GROUP_VISITS[size]).run()
            if found is not None:
                stages = list(self.stages)
                for q, part in zip(group, found):
                    stages[q] = (part, stages[q][1], stages[q][2])
                yield stages
            if self.budget.expired():
                return

    def stage_of(self) -> list[int]:
        where = [0] * len(self.model.ids)
        for q, (nodes, _, _) in enumerate(self.stages):
            for v in nodes:
                where[v] = q
        return where

    def closure(self, v: int, inside: frozenset[int], down: bool) -> frozenset[int]:
        """``v`` and its descendants (``down``) or ancestors inside ``inside``."""
        links = self.model.succs if down else self.model.preds
        seen = {v}
        todo = [v]
        while todo:
            u = todo.pop()
            for x, _ in links[u]:
                if x in inside and x not in seen:
                    seen.add(x)
                    todo.append(x)
        return frozenset(seen)

    def _targets(self, part: frozenset[int], i: int, down: bool, where: list[int]) -> range:
        """The stages ``part`` (closed inside stage ``i``) may go to, later (``down``) or earlier ones."""
        if down:
            last = min((where[u] for v in part for u, _ in self.model.succs[v] if u not in part), default=len(self.stages) - 1)
            return range(i + 1, last + 1)
        first = max((where[u] for v in part for u, _ in self.model.preds[v] if u not in part), default=0)
        return range(i - 1, first - 1, -1)

    def node_moves(self) -> Iterator[list[Stage]]:
        """Plans with one closure moved (module docstring, 1), out of the slowest stages first."""
        where = self.stage_of()
        for i in sorted(range(len(self.stages)), key=lambda q: -self.times[q]):
            nodes = self.stages[i][0]
            seen: set[tuple[frozenset[int], bool]] = set()
            for v in sorted(nodes):
                for down in (True, False):
                    part = self.closure(v, nodes, down)
                    if (part, down) in seen or (self.forced and part == nodes):
                        continue
                    seen.add((part, down))
                    for j in self._targets(part, i, down, where):
                        yield self._moved(i, j, part)

    def _moved(self, i: int, j: int, part: frozenset[int]) -> list[Stage]:
        stages = list(self.stages)
        nodes, d, t = stages[i]
        stages[i] = (nodes - part, d, t)
        to_nodes, to_d, to_t = stages[j]
        stages[j] = (to_nodes | part, to_d, to_t)
        return [st for st in stages if st[0]]

    def reorders(self) -> Iterator[list[Stage]]:
        """Plans with one stage (its nodes and degrees) moved to another place in the pipeline, wherever every edge
        still goes forward: the stages it passes change their micro-batches in flight, and so their memory and time
        (module docstring, 5).  Out of the slowest stages first."""
        n = len(self.stages)
        where = self.stage_of()
        for i in sorted(range(n), key=lambda q: -self.times[q]):
            nodes = self.stages[i][0]
            # it may go after every stage that holds a predecessor and before every one that holds a successor
            after = max((where[u] for v in nodes for u, _ in self.model.preds[v] if u not in nodes), default=-1)
            before = min((where[u] for v in nodes for u, _ in self.model.succs[v] if u not in nodes), default=n)
            for j in range(after + 1, before):
                if j != i:
                    stages = list(self.stages)
                    stages.insert(j, stages.pop(i))
                    yield stages

    def degrees(self, sets: Sequence[frozenset[int]]) -> list[Stage] | None:
        """The stages with every ``(d, t)`` re-chosen to minimise the largest time (module docstring, 3); ``None``: no fit."""
        model = self.model
        cl = model.problem.cluster
        options = [(d, t) for d in model.divisors for t in model.degrees if d * t <= cl.device_count]
        layer: dict[tuple[int, int], float] = {(0, 0): 0.0}
        history: list[dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]]] = []
        for nodes in reversed(sets):
            new: dict[tuple[int, int], float] = {}
            back: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]] = {}
            for (used, s), value in layer.items():
                for d, t in options:
                    state = (used + d * t, s + d)
                    if state[0] > cl.device_count or state[1] > model.problem.microbatches:
                        continue
                    worst = max(value, model.stage(nodes, d, t, -(-state[1] // d)))
                    if math.isfinite(worst) and worst < new.get(state, math.inf):
                        new[state], back[state] = worst, ((used, s), (d, t))
            layer = _pareto(new)
            history.append(back)
        if not layer:
            return None
        state = min(layer, key=lambda st: (layer[st], st))
        chosen: list[tuple[int, int]] = []
        for back in reversed(history):
            state, dt = back[state]
            chosen.append(dt)
        return [(nodes, d, t) for nodes, (d, t) in zip(sets, chosen)]

    def reshapes(self) -> Iterator[list[Stage]]:
        """Merges of adjacent stages and splits of the slowest stage, each with the degree DP (module docstring, 4)."""
        sets = [nodes for nodes, _, _ in self.stages]
        for i in range(len(sets) - 1):
            merged = self.degrees([*sets[:i], sets[i] | sets[i + 1], *sets[i + 2 :]])
            if merged is not None:
                yield merged
        i = max(range(len(sets)), key=lambda q: self.times[q])
        if len(sets[i]) < 2:
            return
        parts = {self.closure(v, sets[i], True) for v in sets[i]}
        for later in sorted(parts, key=lambda x: abs(2 * len(x) - len(sets[i]))):
            if later == sets[i]:
                continue
            split = self.degrees([*sets[:i], sets[i] - later, later, *sets[i + 1 :]])
            if split is not None:
                yield split
            if self.budget.expired():
                return

    def first_improvement(self, candidates: Iterator[list[Stage]]) -> bool:
        for stages in candidates:
            if self.accept(stages):
                return True
            if self.budget.expired():
                return False
        return False

    def run(self) -> None:
        """Until no neighbourhood improves the plan or the budget is spent (module docstring)."""
        while not self.budget.expired():
            neighbourhoods = (self.node_moves(), self.reorders(), *(self.group_splits(size) for size in GROUP_VISITS))
            if any(self.first_improvement(moves) for moves in neighbourhoods):
                continue
            redone = self.degrees([nodes for nodes, _, _ in self.stages])
            if redone is not None and self.accept(redone):
                continue
            if self.forced or not self.first_improvement(self.reshapes()):
                return


class _GroupSplit:
    """The best split of a few stages' nodes among them, everything else fixed (module docstring, 2): branch and bound.

    The nodes of the union go, in a topological order, each to one of the stages (``sides``, in pipeline order): to
    a side no earlier than its predecessors' in the union, and, for an edge to or from a stage outside the group,
    to a side that keeps that edge forward.  Each side's sum of its nodes' least seconds and least bytes only grows
    along the way: a branch whose side is already no faster than the best group so far (its slowest stage), or
    past the memory, is cut.  Complete splits get their exact times (:meth:`_Model.stage`).
    """

    def __init__(self, search: _Search, group: Sequence[int], max_visits: int | None = None) -> None:
        model = search.model
        self.model = model
        self.group = list(group)
        self.stages = [search.stages[q] for q in group]
        ys = search.ys()
        self.ys = [ys[q] for q in group]
        self.union = frozenset().union(*(st[0] for st in self.stages))
        where = search.stage_of()
        self.order = [v for v in search.topological if v in self.union]
        self.allowed: dict[int, list[int]] = {}
        for v in self.order:
            late = min((where[u] for u, _ in model.succs[v] if u not in self.union), default=len(search.stages))
            early = max((where[u] for u, _ in model.preds[v] if u not in self.union), default=-1)
            self.allowed[v] = [q for q, st in enumerate(group) if early <= st <= late]
        links = [model.preds[v] + model.succs[v] for v in range(len(model.ids))]
        #: per node of the union: 2 bytes of its edges out of the union; its edges inside (neighbour, 2 bytes)
        self.outside = {v: math.fsum(2.0 * c for u, c in links[v] if u not in self.union) for v in self.order}
        self.inside = {v: [(u, 2.0 * c) for u, c in links[v] if u in self.union] for v in self.order}
        self.floors: list[tuple[list[float], list[float]]] = [
            (cost.tolist(), mem.tolist()) for cost, mem in (model.floor(d, t, y) for (_, d, t), y in zip(self.stages, self.ys))
        ]
        self.union_preds = {v: [u for u, _ in model.preds[v] if u in self.union] for v in self.order}
        self.per_byte = [1.0 / (d * model.problem.cluster.bandwidth_bytes_per_s) for _, d, _ in self.stages]
        self.weights = [float(d) for _, d, _ in self.stages]
        # the device-seconds the nodes from position k on need at the least, on whichever side each goes
        least = [min(w * cost[v] for w, (cost, _) in zip(self.weights, self.floors)) for v in self.order]
        self.rest = [*list(itertools.accumulate(least[::-1]))[::-1], 0.0]
        small = [min(mem[v] for _, mem in self.floors) for v in self.order]
        self.rest_bytes = [*list(itertools.accumulate(small[::-1]))[::-1], 0.0]
        self.best = max(search.times[q] for q in group)
        # below the time as the acceptance key rounds it too: a split that only ties the group's slowest stage is no move
        self.target = min(self.best, float(f"{self.best:.12g}")) * (1 - 1e-12)
        self.side: dict[int, int] = {}
        #: per side: a lower bound of its time from the nodes placed so far (least seconds, edges cut so far)
        self.cost = [0.0] * len(group)
        self.mem = [0.0] * len(group)
        self.found: list[frozenset[int]] | None = None
        self.visits = GROUP_VISITS[len(group)] if max_visits is None else max_visits
        self.budget = search.budget

    def run(self) -> list[frozenset[int]] | None:
        """The nodes of each stage of the group in the best split strictly faster than now, or ``None``.

        The search runs in C where the extension is built (``heuristics/_groupsplit.c``, the same branches in
        the same order, complete splits priced here by :meth:`_price`), else in Python (:meth:`_branch`).
        """
        if _native is not None:
            self._run_native()
        else:
            self._branch(0)
        return self.found

    def _run_native(self) -> None:
        """:meth:`_branch` from the first node, in C: the group's arrays by position in :attr:`order`."""
        model, order, n = self.model, self.order, len(self.order)
        position = {v: k for k, v in enumerate(order)}

        def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            start = np.zeros(n + 1, dtype=np.int32)
            start[1:] = np.cumsum([len(r) for r in rows])
            return start, np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(start[-1]))

        allowed = csr([self.allowed[v] for v in order])
        preds = csr([[position[u] for u in self.union_preds[v]] for v in order])
        links = csr([[position[u] for u, _ in self.inside[v]] for v in order])
        link_bytes = np.fromiter((c for v in order for _, c in self.inside[v]), dtype=np.float64, count=len(links[1]))
        rows = np.asarray(order, dtype=np.intp)
        floors = [model.floor(d, t, y) for (_, d, t), y in zip(self.stages, self.ys)]  # per side: least seconds, bytes
        cost = np.ascontiguousarray([seconds[rows] for seconds, _ in floors])
        mem = np.ascontiguousarray([least_bytes[rows] for _, least_bytes in floors])
        side = np.full(n, -1, dtype=np.int32)
        now = np.zeros(len(self.group), dtype=np.float64)

        def leaf() -> float:
            self._price(side.tolist(), now.tolist())
            return self.target

        self.visits = _native.split(
            *allowed,
            *preds,
            *links,
            link_bytes,
            cost,
            mem,
            np.array([self.outside[v] for v in order], dtype=np.float64),
            np.array(self.per_byte, dtype=np.float64),
            np.array(self.weights, dtype=np.float64),
            np.array(self.rest, dtype=np.float64),
            np.array(self.rest_bytes, dtype=np.float64),
            side,
            now,
            np.array(model.problem.cluster.kind_arrays()[0], dtype=np.float64),  # the kinds' memory (one kind: [M])
            self.target,
            self.visits,
            leaf,
            self.budget.expired,
        )

    def _branch(self, k: int) -> None:
        self.visits -= 1
        if self.visits < 0 or (self.visits % 4096 == 0 and self.budget.expired()):
            self.visits = -1
            return
        if k == len(self.order):
            self._leaf()
            return
        target, now, used = self.target, self.cost, self.mem
        # every side below the target: its d times its time left holds its nodes' least seconds times d
        if self.rest[k] > math.fsum(w * (target - c) for w, c in zip(self.weights, now)) * (1 + 1e-9):
            return
        memory = self.model.problem.memory_bytes
        if self.rest_bytes[k] > math.fsum(memory - m for m in used) * (1 + 1e-9):  # and every side's memory
            return
        v = self.order[k]
        side = self.side
        lowest = max((side[u] for u in self.union_preds[v]), default=0)
        for q in self.allowed[v]:
            cost, mem = self.floors[q]
            if q < lowest or used[q] + mem[v] > memory:
                continue
            # the node's seconds, its edges out of the union and to nodes placed on other sides, on both ends
            per_byte = self.per_byte
            cut = self.outside[v]
            others: list[tuple[int, float]] = []
            for u, c in self.inside[v]:
                r = side.get(u, q)
                if r != q:
                    cut += c
                    others.append((r, c * per_byte[r]))
            mine = cost[v] + cut * per_byte[q]
            now[q] += mine
            for r, x in others:
                now[r] += x
            if now[q] < target and all(now[r] < target for r, _ in others):
                side[v] = q
                used[q] += mem[v]
                self._branch(k + 1)
                used[q] -= mem[v]
                del side[v]
                target = self.target  # a split found below lowers it
            now[q] -= mine
            for r, x in others:
                now[r] -= x

    def _leaf(self) -> None:
        self._price([self.side[v] for v in self.order], self.cost)

    def _price(self, sides: Sequence[int], bounds: Sequence[float]) -> None:
        """A complete split (each node's side, by position in :attr:`order`) priced exactly; kept when faster.

        ``bounds`` (each side's lower bound) orders the sides: the likeliest slowest is priced first.
        """
        parts: list[set[int]] = [set() for _ in self.group]
        for v, q in zip(self.order, sides):
            parts[q].add(v)
        if not all(parts):
            return
        keys = [(frozenset(part), d, t, y) for part, (_, d, t), y in zip(parts, self.stages, self.ys)]
        if not all(self.model.lower(*key) < self.target for key in keys):
            return
        worst = 0.0
        for q in sorted(range(len(parts)), key=lambda q: -bounds[q]):
            _, d, t = self.stages[q]
            worst = max(worst, self.model.stage(frozenset(parts[q]), d, t, self.ys[q]))
            if not worst < self.target:
                return
        self.best, self.target, self.found = worst, worst * (1 - 1e-12), [frozenset(part) for part in parts]


def _topological(model: _Model) -> list[int]:
    """The nodes in a topological order (Kahn's, smallest index first among the ready)."""
    indeg = [len(p) for p in model.preds]
    ready = [v for v, x in enumerate(indeg) if x == 0][::-1]
    order: list[int] = []
    while ready:
        v = ready.pop()
        order.append(v)
        for u, _ in model.succs[v]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return order


def _pareto(states: dict[tuple[int, int], float]) -> dict[tuple[int, int], float]:
    """The states no other beats on devices used, ``s`` and value at once (fewer devices and less ``s`` are better)."""
    kept: dict[tuple[int, int], float] = {}
    for state in sorted(states, key=lambda st: (states[st], st)):
        value = states[state]
        if not any(u <= state[0] and s <= state[1] for u, s in kept):
            kept[state] = value
    return kept


def _kicks(search: _Search, rng: random.Random) -> None:
    """Kicks from the best plan met: :data:`KICK_MOVES` random node moves, then the local search again.

    Until the budget is spent or :data:`FRUITLESS_KICKS` kicks in a row found nothing better; the search ends
    on the best plan it met (a kick that led nowhere better is undone).
    """
    best = (search.stages, search.times, search.key)
    fruitless = 0
    while fruitless < FRUITLESS_KICKS and not search.budget.expired():
        for _ in range(KICK_MOVES):
            moves = [stages for stages in search.node_moves() if all(map(math.isfinite, search.model.times(stages)))]
            if not moves:
                return
            search.stages = rng.choice(moves)
            search.times = search.model.times(search.stages)
            search.key = _key(search.times)
        search.run()
        fruitless += 1
        if search.key < best[2]:
            best = (search.stages, search.times, search.key)
            fruitless = 0
        search.stages, search.times, search.key = best


def polish(problem: JointProblem, plan: JointPlan, budget: Budget, seed: int = 0) -> tuple[JointPlan, float]:
    """A plan at least as good as ``plan``, by local search (module docstring), within ``budget``.

    Parameters
    ----------
    problem
        The joint problem.
    plan
        A plan of ``problem`` (it must pass :func:`~milp_partition.verifiers.joint.verify_joint`).
    budget
        Checked between moves: past it the best plan so far is handed back.  Time left at a local optimum goes to
        kicks (random node moves, then the search again; seeded by ``seed``).

    Returns
    -------
    (JointPlan, float)
        A verified plan whose verifier objective is strictly below ``plan``'s, and that objective; or
        ``plan`` and its own objective when the search found nothing better.

    Raises
    ------
    ValueError
        ``plan`` is not a plan of ``problem`` (the verifier's violations in the message).
    """
    start = verify_joint(problem, plan)
    if not start.feasible:
        raise ValueError("polish needs a verified plan; this one is not: " + "; ".join(start.violations[:5]))
    model = _Model(problem)
    index = {v: q for q, v in enumerate(model.ids)}
    stages = [(frozenset(index[v] for v in st.nodes), st.data_parallel, st.tensor_parallel) for st in plan.stages]
    search = _Search(model, stages, budget)
    search.run()
    _kicks(search, random.Random(seed))
    better = model.plan(search.stages)
    report = verify_joint(problem, better)
    if report.feasible and report.objective < start.objective:
        return better, report.objective
    return plan, start.objective


def polish_starts(problem: JointProblem, starts: Sequence[JointPlan], budget: Budget, seed: int = 0) -> tuple[JointPlan, float]:
    """:func:`polish` from each plan of ``starts`` in turn (local optima differ by start), the best plan found.

    Each start gets an equal share of what is left when its turn comes (time a start leaves unused goes to
    the next); ``seed`` seeds every start's kicks.  Returns the best polished plan and its verifier objective (a
    start itself where none improved).  ``starts`` must be non-empty; each must be a plan of ``problem``
    (:class:`ValueError` otherwise).
    """
    if not starts:
        raise ValueError("polish_starts needs at least one plan")
    best: tuple[JointPlan, float] | None = None
    for q, start in enumerate(starts):
        plan, value = polish(problem, start, budget.capped(budget.left() / (len(starts) - q)), seed)
        if best is None or value < best[1]:
            best = (plan, value)
    assert best is not None
    return best
