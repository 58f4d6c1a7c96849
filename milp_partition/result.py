"""The result of a solve: what the CLI prints and writes as JSON.

The JSON contract (every problem): ``status``, ``objective`` (the verifier's
value in the instance's own units), ``bound``, ``gap``, ``solve_seconds``,
``solver`` and ``assignment`` (node id -> device id), plus problem-specific
fields.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from milp_partition.io.atomic import write_atomic

RESULT_FORMAT = "milp-partition-result/1"

#: Why a solve stopped before it proved its answer: its time limit, or Ctrl-C / SIGTERM.
StopReason = Literal["time_limit", "interrupt"]


class Status(StrEnum):
    """What a result is; :func:`milp_partition.chain.settle` is the one policy that decides it.

    ``optimal``: a verified solution meets a proven bound; ``feasible``: a verified
    solution, not proven; ``infeasible``: proven to have no solution; ``unknown``:
    neither; ``error``: a step failed and no verified solution exists.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"
    ERROR = "error"


@dataclass
class HeuristicRun:
    """One heuristic's outcome, as the verifier scored it."""

    name: str
    objective: float | None
    seconds: float
    exact: bool
    message: str


@dataclass
class Result:
    """A verified answer.

    Attributes
    ----------
    status
        ``optimal`` (proven by the solver, re-checked by the verifier), ``feasible``
        (verified incumbent, not proven), ``infeasible`` (proven), ``unknown`` or ``error``.
    objective
        The verifier's objective of ``assignment`` (``None`` when there is none).
    bound
        A proven lower bound in the same units (``None`` when none).
    gap
        ``(objective - bound) / objective`` (``None`` when either is missing).
    stopped_by
        ``"time_limit"`` (a feasible or unknown answer because the budget ran out),
        ``"interrupt"`` (Ctrl-C or SIGTERM) or ``None``.
    """

    problem: str
    solver: str
    status: Status = Status.UNKNOWN
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    solve_seconds: float = 0.0
    objective_name: str = "time_per_sample"
    time_unit: str = ""
    assignment: dict[str, str] = field(default_factory=dict)
    #: Placement problem: task id -> start time (the verified schedule's), next to ``assignment``.
    starts: dict[str, float] = field(default_factory=dict)
    #: Placement with link contention: ``"source->target"`` -> start of that edge's transfer.
    transfer_starts: dict[str, float] = field(default_factory=dict)
    time_per_sample: float | None = None
    peak_memory_bytes: float | None = None
    loads: dict[str, float] = field(default_factory=dict)
    memory_bytes: dict[str, float] = field(default_factory=dict)
    message: str = ""
    #: Why the solve stopped before a proof (``"time_limit"`` or ``"interrupt"``); ``None`` when nothing cut it short.
    #: :func:`milp_partition.chain.run_chain` sets it and composes the message's stop note from it.
    stopped_by: StopReason | None = None
    instance: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    heuristics: list[HeuristicRun] = field(default_factory=list)
    warm_start: dict[str, Any] = field(default_factory=dict)
    solver_seconds: float = 0.0
    solver_notes: dict[str, Any] = field(default_factory=dict)
    solver_log: str = ""
    #: Claims the status policy refused as contradictions (each with its reason); empty when all agreed.
    discarded: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d = {"format": RESULT_FORMAT, **d}
        return _finite(d)

    def write(self, path: str | Path) -> None:
        write_atomic(path, json.dumps(self.to_json_dict(), indent=2) + "\n")  # the old file stays whole if it fails


def _finite(obj: Any) -> Any:
    """Replace non-finite floats by None so the JSON is standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
