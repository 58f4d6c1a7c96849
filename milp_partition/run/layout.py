"""Where each rank of a plan sits and in which order it runs its micro-batches, without torch.

A plan whose stages have different (data, tensor) degrees fits no ``(pp, dp, tp)`` device mesh, so
:mod:`milp_partition.run.mixed` runs it with its own schedule. This module is that schedule's arithmetic:

- :class:`RankLayout`: stage ``q`` holds the ranks ``offset_q .. offset_q + d_q t_q - 1``, replica ``r``'s
  tensor-parallel ranks side by side (``offset_q + r t_q + i``); micro-batch ``j`` of the ``N`` goes to
  replica ``j mod d_q`` of every stage (round robin, so that a stage with fewer replicas takes from each
  replica before it in turn);
- :func:`one_f_one_b`: each replica's order of forward and backward passes, 1F1B with at most ``y_q``
  micro-batches in flight (the planner's ``microbatches_in_flight``), found by simulating the schedule in
  unit time steps. Every pass starts only after the passes it needs (the forward of the same micro-batch
  one stage up, the backward one stage down) in the simulation, so the replicas' orders agree with one
  global order: with non-blocking sends and blocking receives no run of them can deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: One pass of a schedule: ``("F", j)`` or ``("B", j)`` for micro-batch ``j``.
Pass = tuple[str, int]


@dataclass(frozen=True)
class Place:
    """One rank's stage, data-parallel replica and tensor-parallel index (all from 0)."""

    stage: int
    replica: int
    tp_index: int


@dataclass(frozen=True)
class RankLayout:
    """The ranks of a plan with per-stage degrees ``degrees[q] = (d_q, t_q)`` over ``microbatches`` micro-batches."""

    degrees: tuple[tuple[int, int], ...]
    microbatches: int

    def __post_init__(self) -> None:
        if not self.degrees:
            raise ValueError("a plan has at least one stage")
        for q, (d, t) in enumerate(self.degrees):
            if d < 1 or t < 1:
                raise ValueError(f"stage {q + 1}: degrees must be positive, got d = {d}, t = {t}")
            if self.microbatches % d:
                raise ValueError(f"stage {q + 1}: data_parallel {d} does not divide N = {self.microbatches}")

    @property
    def stages(self) -> int:
        return len(self.degrees)

    @property
    def world_size(self) -> int:
        return sum(d * t for d, t in self.degrees)

    def offset(self, stage: int) -> int:
        """The first rank of ``stage``."""
        return sum(d * t for d, t in self.degrees[:stage])

    def place(self, rank: int) -> Place:
        """Where ``rank`` sits."""
        for q, (_, t) in enumerate(self.degrees):
            local = rank - self.offset(q)
            if 0 <= local < self.degrees[q][0] * t:
                return Place(q, local // t, local % t)
        raise ValueError(f"rank {rank} is outside the plan's {self.world_size} ranks")

    def ranks(self, stage: int, replica: int) -> list[int]:
        """The tensor-parallel ranks of one replica of ``stage``."""
        t = self.degrees[stage][1]
        first = self.offset(stage) + replica * t
        return list(range(first, first + t))

    def replica_of(self, stage: int, microbatch: int) -> int:
        """The replica of ``stage`` that runs ``microbatch``."""
        return microbatch % self.degrees[stage][0]

    def microbatches_of(self, stage: int, replica: int) -> list[int]:
        """The micro-batches one replica of ``stage`` runs, in order."""
        return list(range(replica, self.microbatches, self.degrees[stage][0]))

    def data_groups(self, stage: int) -> list[list[int]]:
        """The ranks that all-reduce gradients together: one group per tensor-parallel index of ``stage``."""
        d, t = self.degrees[stage]
        return [[self.offset(stage) + r * t + i for r in range(d)] for i in range(t)]


def one_f_one_b(layout: RankLayout, in_flight: Sequence[int]) -> dict[tuple[int, int], list[Pass]]:
    """Each replica's passes, ``(stage, replica) -> [("F", j), ("B", j), ...]``: 1F1B, ``in_flight[q]`` at most.

    A simulation in unit steps: at each step every replica runs at most one pass that is ready (its inputs
    were made at an earlier step), a backward before a forward (1F1B), a forward only while fewer than
    ``in_flight[q]`` of its micro-batches wait for their backward, each replica's micro-batches in order.

    Raises
    ------
    RuntimeError
        When no replica can move and passes are left (the limits admit no schedule; not seen with the
        planner's ``y_q = ceil((d_q + ... + d_last) / d_q)``).
    """
    S = layout.stages
    if len(in_flight) != S or any(y < 1 for y in in_flight):
        raise ValueError(f"in_flight needs one positive limit per stage, got {list(in_flight)}")
    todo = {(q, r): layout.microbatches_of(q, r) for q in range(S) for r in range(layout.degrees[q][0])}
    next_f = dict.fromkeys(todo, 0)
    waiting: dict[tuple[int, int], list[int]] = {key: [] for key in todo}  # forwarded, backward not yet run
    done_f: set[tuple[int, int]] = set()  # (stage, micro-batch), done at an earlier step
    done_b: set[tuple[int, int]] = set()
    order: dict[tuple[int, int], list[Pass]] = {key: [] for key in todo}
    total = 2 * sum(len(v) for v in todo.values())
    count = 0
    while count < total:
        made_f: list[tuple[int, int]] = []
        made_b: list[tuple[int, int]] = []
        for key, items in todo.items():
            q, _ = key
            oldest = waiting[key][0] if waiting[key] else None
            if oldest is not None and (q == S - 1 or (q + 1, oldest) in done_b):
                waiting[key].pop(0)
                order[key].append(("B", oldest))
                made_b.append((q, oldest))
                continue
            k = next_f[key]
            if k < len(items) and len(waiting[key]) < in_flight[q] and (q == 0 or (q - 1, items[k]) in done_f):
                next_f[key] = k + 1
                waiting[key].append(items[k])
                order[key].append(("F", items[k]))
                made_f.append((q, items[k]))
        if not made_f and not made_b:
            raise RuntimeError(f"no 1F1B schedule with at most {list(in_flight)} micro-batches in flight per stage")
        done_f.update(made_f)
        done_b.update(made_b)
        count += len(made_f) + len(made_b)
    return order
