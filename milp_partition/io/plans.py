"""One plan file per problem: the answer alone, without the report (``milp-partition-plan/1``).

A plan file is what a solve decided, in the same field names as the result JSON (so a result file is also read as a
plan):

==========  =================================================================================================
problem     fields
==========  =================================================================================================
pipeline    ``assignment``: node id -> device id
strategy    ``assignment``: layer id -> configuration name
placement   ``assignment``: task id -> device id; ``starts``: task id -> start; ``transfer_starts`` (optional):
            ``"source->target"`` -> start of that edge's transfer
joint       ``stages``: in pipeline order, each ``{nodes, data_parallel, tensor_parallel, configs}``
galvatron   ``galvatron_config``: Galvatron's runtime config (:mod:`milp_partition.io.export.galvatron`)
==========  =================================================================================================

plus ``format`` and ``problem``.  :func:`write_plan` writes one, :func:`read_plan` reads one back (or a result JSON of
that problem) into the problem's solution type, every field checked: bad input is an :class:`InputError` naming the
file and the field.  Engine formats (Galvatron, torchtitan, Megatron-LM) are exports, in
:mod:`milp_partition.io.export`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from milp_partition.errors import InputError
from milp_partition.galvatron.problem import GalvatronPlan
from milp_partition.io.export.galvatron import plan_from_config, plan_to_config
from milp_partition.io.json_text import check_object, parse_json, read_text_file, to_float, write_text_file
from milp_partition.joint.problem import JointPlan, JointStage, plan_to_dict
from milp_partition.pipeline.problem import PipelineSolution
from milp_partition.placement.problem import PlacementProblem, PlacementSolution
from milp_partition.strategy.problem import StrategySolution
from milp_partition.units import MAX_DEVICES

PLAN_FORMAT = "milp-partition-plan/1"
#: Problems with a plan format.
PLAN_PROBLEMS = ("pipeline", "strategy", "placement", "joint", "galvatron")

Plan = PipelineSolution | StrategySolution | PlacementSolution | JointPlan | GalvatronPlan


def plan_to_json(problem_kind: str, plan: Plan, problem: Any = None) -> dict[str, Any]:
    """The plan file's content.  ``problem``: the placement problem (its task and device ids) or the Galvatron problem
    (its global batch and pipeline type); unused for the others."""
    out: dict[str, Any] = {"format": PLAN_FORMAT, "problem": problem_kind}
    if isinstance(plan, PipelineSolution | StrategySolution) and problem_kind in ("pipeline", "strategy"):
        out["assignment"] = dict(plan.assignment if isinstance(plan, PipelineSolution) else plan.choice)
    elif isinstance(plan, PlacementSolution) and problem_kind == "placement":
        if not isinstance(problem, PlacementProblem):
            raise TypeError("a placement plan needs its PlacementProblem (task and device ids)")
        out["assignment"] = {t: problem.device_ids[int(plan.device[i])] for i, t in enumerate(problem.task_ids)}
        out["starts"] = {t: float(plan.start[i]) for i, t in enumerate(problem.task_ids)}
        if plan.transfer_start is not None:
            out["transfer_starts"] = {
                _edge(problem, e): float(plan.transfer_start[e])
                for e in range(problem.num_edges)
                if not math.isnan(float(plan.transfer_start[e]))
            }
    elif isinstance(plan, JointPlan) and problem_kind == "joint":
        out["stages"] = plan_to_dict(plan)
    elif isinstance(plan, GalvatronPlan) and problem_kind == "galvatron":
        out["galvatron_config"] = plan_to_config(problem, plan)
    else:
        raise TypeError(f"no {problem_kind} plan: {type(plan).__name__}")
    return out


def write_plan(path: str | Path, problem_kind: str, plan: Plan, problem: Any = None) -> None:
    """Write ``plan`` as a plan file (atomically)."""
    write_text_file(path, json.dumps(plan_to_json(problem_kind, plan, problem), indent=2) + "\n")


def read_plan(path: str | Path, problem_kind: str, problem: Any = None) -> Plan:
    """A plan of ``problem_kind`` from a plan file or a result JSON (``problem``: the placement problem, for its ids)."""
    source = str(path)
    return plan_from_json(parse_json(read_text_file(path), source), problem_kind, source, problem)


def plan_from_json(data: Any, problem_kind: str, source: str = "", problem: Any = None) -> Plan:
    """The inverse of :func:`plan_to_json` (also reads a result JSON's fields, and a joint plan as a bare list of
    stages)."""
    if problem_kind == "joint" and isinstance(data, list):
        return _joint(data, source)
    obj = check_object(data, "plan", source)
    kind = obj.get("problem")
    if obj.get("format") == PLAN_FORMAT and kind != problem_kind:
        raise InputError(f"a {kind} plan, not a {problem_kind} one", source=source, where="problem")
    if problem_kind in ("pipeline", "strategy"):
        value = obj.get("assignment")
        if not isinstance(value, Mapping) and "format" not in obj:
            value = obj  # a bare object: node id -> device id (pipeline) or layer id -> configuration (strategy)
        what = "device id" if problem_kind == "pipeline" else "configuration id"
        if not isinstance(value, Mapping) and "assignment" in obj:
            raise InputError(
                f"must be an object mapping node id to {what}, got {type(value).__name__}", source=source, where="'assignment'"
            )
        if not isinstance(value, Mapping):
            raise InputError(
                f"expected a plan file or result JSON with an 'assignment' object, or an object mapping node id to {what}",
                source=source,
            )
        for key, item in value.items():
            if not isinstance(item, str):
                raise InputError(f"must be a {what} (a string), got {_short(item)}", source=source, where=f"entry {key!r}")
        assignment = dict(value)
        return PipelineSolution(assignment) if problem_kind == "pipeline" else StrategySolution(assignment)
    if problem_kind == "placement":
        if not isinstance(problem, PlacementProblem):
            raise TypeError("a placement plan needs its PlacementProblem (task and device ids)")
        return _placement(obj, problem, source)
    if problem_kind == "joint":
        return _joint(obj.get("stages"), source)
    if problem_kind == "galvatron":
        cfg = check_object(obj.get("galvatron_config"), "galvatron_config", source)
        try:
            return plan_from_config(dict(cfg))
        except ValueError as exc:
            raise InputError(str(exc), source=source) from None
    raise InputError(f"no plan format for problem {problem_kind!r}; known: {', '.join(PLAN_PROBLEMS)}", source=source)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _edge(problem: PlacementProblem, e: int) -> str:
    return f"{problem.task_ids[int(problem.edge_source[e])]}->{problem.task_ids[int(problem.edge_target[e])]}"


def _str_map(value: Any, where: str, source: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InputError("expected an object mapping ids to names", source=source, where=where)
    return dict(value)


def _placement(obj: Mapping[str, Any], problem: PlacementProblem, source: str) -> PlacementSolution:
    if isinstance(obj.get("assignment"), Mapping):
        assignment, starts = obj["assignment"], obj.get("starts") or {}
    elif "format" not in obj and obj and all(isinstance(v, Mapping) for v in obj.values()):  # task id -> {device, start}
        assignment = {k: v.get("device") for k, v in obj.items()}
        starts = {k: v.get("start") for k, v in obj.items() if v.get("start") is not None}
    else:
        raise InputError(
            "expected a plan file or result JSON with 'assignment' (and 'starts'), or an object task id -> {device, start}",
            source=source,
        )
    if not isinstance(starts, Mapping):
        raise InputError(f"'starts' must be an object mapping task id to start time, got {type(starts).__name__}", source=source)
    device, start = np.zeros(problem.num_tasks, dtype=np.int64), np.zeros(problem.num_tasks)
    for i, t in enumerate(problem.task_ids):
        if t not in assignment:
            raise InputError("the solution gives no device for this task", source=source, where=f"task {t!r}")
        dev = assignment[t]
        if not isinstance(dev, str) or dev not in problem.device_index:
            raise InputError(
                f"unknown device {dev!r}; devices are {', '.join(problem.device_ids)}", source=source, where=f"task {t!r}"
            )
        device[i] = problem.device_index[dev]
        start[i] = math.nan if starts.get(t) is None else to_float(starts[t], f"task {t!r} start", source)
        if start[i] < 0:
            raise InputError(
                f"must be at least 0 (the schedule starts at time 0), got {starts[t]!r}", source=source, where=f"task {t!r} start"
            )
    unknown = sorted(str(k) for k in (set(assignment) | set(starts)) - set(problem.task_ids))
    if unknown:
        raise InputError(f"unknown task id {unknown[0]!r} in the solution", source=source)
    transfer = None
    if isinstance(obj.get("transfer_starts"), Mapping) and obj["transfer_starts"]:
        given = obj["transfer_starts"]
        keys = [_edge(problem, e) for e in range(problem.num_edges)]
        strangers = sorted(str(k) for k in set(given) - set(keys))
        if strangers:
            raise InputError(
                f"unknown edge {strangers[0]!r} in 'transfer_starts'; keys are \"source->target\" of the instance's edges",
                source=source,
            )
        transfer = np.array(
            [math.nan if given.get(k) is None else to_float(given[k], f"transfer {k!r} start", source) for k in keys]
        )
    return PlacementSolution(device, start, transfer)


def _joint(stages: Any, source: str) -> JointPlan:
    if not isinstance(stages, list) or not stages:
        raise InputError("expected a result JSON with a non-empty 'stages' list, or such a list", source=source)
    out = []
    for q, st in enumerate(stages):
        where = f"stages[{q}]"
        st = check_object(st, where, source)
        nodes, configs = st.get("nodes"), st.get("configs")
        if not isinstance(nodes, list) or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in nodes):
            raise InputError(f"'nodes' must be a list of node ids, got {_short(nodes)}", source=source, where=where)
        degrees = []
        for key in ("data_parallel", "tensor_parallel"):
            value = st.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEVICES:
                raise InputError(
                    f"'{key}' must be an integer from 1 to {MAX_DEVICES}, got {_short(value)}", source=source, where=where
                )
            degrees.append(value)
        if not isinstance(configs, Mapping) or not all(isinstance(v, str) for v in configs.values()):
            raise InputError(
                f"'configs' must be an object mapping node id to configuration id, got {_short(configs)}",
                source=source,
                where=where,
            )
        out.append(JointStage(tuple(str(v) for v in nodes), degrees[0], degrees[1], {str(k): v for k, v in configs.items()}))
    return JointPlan(tuple(out))
