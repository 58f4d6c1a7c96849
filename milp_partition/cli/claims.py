"""The claims a result file makes, recomputed under ``evaluate``: a contradiction fails, it never passes.

``evaluate`` re-verifies the solution of a result file (``milp-partition-result/1``) and
then compares everything else the file says about it with the verifier's figures: the
problem, the status (a verified solution is ``optimal`` or ``feasible``, never
``infeasible``, ``unknown`` or ``error``), the objective, the bound (never above the
verified value; ``optimal`` only when it meets it), the gap, and each problem's own
figures (loads, memory, stages, the instance's sizes).  A claim that disagrees is bad
input: exit 2 with one line naming each contradiction.  A bare solution (no result
around it) claims nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from milp_partition.chain import OBJECTIVE_MATCH_REL_TOL, PROOF_ABS_TOL, gap_of, meets
from milp_partition.errors import InputError
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.result import RESULT_FORMAT

#: Statuses a result may claim for a solution that verifies.
_WITH_A_SOLUTION = ("optimal", "feasible")


#: Where a result holds its solution (what the solution readers unwrap): such a field makes the file a result whatever
#: its ``format`` says, so removing or changing ``format`` cannot switch its claims' checks off.
_SOLUTION_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("assignment", Mapping),
    ("stages", list),
    ("galvatron_config", Mapping),
)


def read_result(path: Path) -> Mapping[str, Any] | None:
    """The parsed result file at ``path`` (``None`` when the file is a bare solution, not a result).

    A file is a result when its ``format`` is ``milp-partition-result/1`` or when it wraps its solution as a result
    does (an ``assignment`` object, a ``stages`` list, a ``galvatron_config`` object): the solution readers take the
    solution from there, so its claims are checked too.
    """
    data = parse_json(read_text_file(path), str(path))
    if not isinstance(data, Mapping):
        return None
    if data.get("format") == RESULT_FORMAT or any(isinstance(data.get(k), t) for k, t in _SOLUTION_FIELDS):
        return data
    return None


def _close(claimed: float, verified: float) -> bool:
    return abs(claimed - verified) <= OBJECTIVE_MATCH_REL_TOL * max(abs(claimed), abs(verified)) + PROOF_ABS_TOL


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _differs(claimed: Any, verified: Any, where: str, out: list[str]) -> None:
    """Append where ``claimed`` differs from ``verified`` (numbers within the objective tolerance; ints exactly)."""
    if isinstance(verified, Mapping):
        if not isinstance(claimed, Mapping) or set(map(str, claimed)) != set(map(str, verified)):
            out.append(f"{where} {_short(claimed)}, but the verifier has {_short(dict(verified))}")
            return
        by_key = {str(k): v for k, v in claimed.items()}
        for k, v in verified.items():
            _differs(by_key[str(k)], v, f"{where}[{str(k)!r}]", out)
    elif isinstance(verified, (list, tuple)):
        if not isinstance(claimed, list) or len(claimed) != len(verified):
            out.append(f"{where} {_short(claimed)}, but the verifier has {_short(list(verified))}")
            return
        for q, (c, v) in enumerate(zip(claimed, verified, strict=True)):
            _differs(c, v, f"{where}[{q}]", out)
    elif isinstance(verified, bool) or isinstance(verified, str) or verified is None:
        if claimed != verified:
            out.append(f"{where} {_short(claimed)}, but the verifier has {_short(verified)}")
    elif isinstance(verified, int):
        if isinstance(claimed, bool) or not isinstance(claimed, int) or claimed != verified:
            out.append(f"{where} {_short(claimed)}, but the verifier has {verified}")
    else:
        x = _number(claimed)
        if x is None or not _close(x, float(verified)):
            out.append(f"{where} {_short(claimed)}, but the verifier has {float(verified)!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_claims(
    data: Mapping[str, Any] | None,
    path: Path,
    problem: str,
    objective: float,
    figures: Mapping[str, Any],
    instance: Mapping[str, Any] | None = None,
) -> None:
    """Raise one :class:`InputError` listing every claim of the result ``data`` that the verifier contradicts.

    ``objective`` is the verified value of the result's solution; ``figures`` maps other fields of the
    result to the verifier's value (compared only where the file has the field); ``instance``: the sizes of
    the instance evaluated, compared with those of the result's ``instance`` object that it has.
    """
    if data is None:
        return
    bad: list[str] = []
    claimed_problem = data.get("problem")
    if "problem" in data and claimed_problem != problem:
        bad.append(f"problem {_short(claimed_problem)}, but it is evaluated as the {problem} problem")
    status = data.get("status")
    if "status" in data and status not in _WITH_A_SOLUTION:
        bad.append(f"status {_short(status)}, but its solution verifies (value {objective!r})")
    if "objective" in data:
        _differs(data["objective"], objective, "objective", bad)
    bound = data.get("bound")
    if bound is not None:
        b = _number(bound)
        if b is None:
            bad.append(f"bound {_short(bound)} is not a finite number")
        elif b - objective > OBJECTIVE_MATCH_REL_TOL * abs(objective) + PROOF_ABS_TOL:
            bad.append(f"bound {b!r} is above the verified value {objective!r}")
        elif status == "optimal" and not meets(objective, b):
            bad.append(f"status 'optimal', but the bound {b!r} does not meet the verified value {objective!r}")
    elif status == "optimal":
        bad.append("status 'optimal' without a bound")
    if data.get("gap") is not None:
        expected = gap_of(objective, _number(bound))
        g = _number(data["gap"])
        if expected is None or g is None or abs(g - expected) > 1e-6:
            bad.append(f"gap {_short(data['gap'])}, but the verified value and the bound give {expected!r}")
    for key, value in figures.items():
        if key in data:
            _differs(data[key], value, key, bad)
    claimed_instance = data.get("instance")
    if claimed_instance is not None and not isinstance(claimed_instance, Mapping):
        bad.append(f"instance {_short(claimed_instance)} is not an object")
    if instance and isinstance(claimed_instance, Mapping):
        for key, value in instance.items():
            if key in claimed_instance:
                _differs(claimed_instance[key], value, f"instance.{key}", bad)
    if bad:
        shown = "; ".join(bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else "")
        raise InputError(f"the result's claims contradict the verifier: {shown}", source=str(path))
