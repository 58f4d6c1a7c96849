"""``solve --problem joint --objective run`` on an imported graph: the plan of least step *as run executes it*.

The problem is :mod:`milp_partition.joint.run_layers`'s (the one cost model, :mod:`milp_partition.costmodel`),
solved by the exact DP :mod:`milp_partition.joint.run_dp` and checked by
:mod:`milp_partition.verifiers.joint_run`; the reported objective is the verifier's step of the global batch,
in seconds.  Coefficients: torch's per-operator costs from ``--coefficients FILE`` (a JSON object with the
fields of :class:`~milp_partition.calibration.torch_ops.OperatorCoefficients`), else measured on this machine
now (and written into the result); messages and all-reduces from the device profile's ``d2d`` link and
all-reduce fit (``--profile``, default the import's).  The result JSON is a joint plan ``milp-partition run``
reads (``stages`` with ``nodes``, degrees and configurations; ``instance.microbatches`` = ``d m``).

Tensor parallelism: the degrees ``t`` in ``--tp-degrees`` (default ``2..k``) that ``run`` can split the model at
(:mod:`milp_partition.joint.run_split`) are offered beside ``t = 1``; ``--tensor-parallel T`` forces one, and a
degree the model cannot split at is refused naming why.  DTensor's overheads come from the calibration of ``E``
(``--time-layers``), else from ``--coefficients`` (fields ``dtensor_module_s``, ``dtensor_optimizer_tensor_s``),
else are measured now on a one-rank mesh.  The same calibration counts what each layer saves on one rank of each
``t``-rank mesh (``cost_model.layer_times.saved_bytes_per_sample_tp``, read back by ``--layer-times``); without it a
rank's saved activations at ``t > 1`` are counted as at ``t = 1`` (an upper bound).  It also times each layer's forward
and backward split over each ``t``-rank mesh as ``run`` splits it (``cost_model.layer_times.split_times_tp``, likewise
read back): the cost model prices a layer at ``t > 1`` by those where timed, by its analytic formula where not
(``cost_model.split_passes_at_t`` says which).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from milp_partition.calibration.torch_ops import OperatorCoefficients, calibrate_operators
from milp_partition.cli.options import flag_name
from milp_partition.cli.output import write_text_atomic
from milp_partition.costmodel.plan import RunCoefficients, RunPlanProblem, RunShape
from milp_partition.costmodel.step import ddp_allreduce_s
from milp_partition.costmodel.tensor import TensorParallelCoefficients
from milp_partition.errors import InputError
from milp_partition.importers.timing import load_profile_spec
from milp_partition.io.imported_layers import read_layers
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.joint.layers import parse_tp_degrees
from milp_partition.joint.run_dp import run_shapes, solve_run_dp
from milp_partition.joint.run_layers import (
    run_problem_from_imported,
    with_busy_times,
    with_saved_at_degree,
    with_split_times,
)
from milp_partition.joint.run_split import offered_degrees
from milp_partition.report import fmt, fmt_bytes, names_span
from milp_partition.run.empty import EmptySteps, calibrate_empty_steps
from milp_partition.run.median_of import median_of
from milp_partition.run.predict import calibrate_runtime, time_layers_by_size
from milp_partition.units import parse_bytes
from milp_partition.verifiers.joint_run import verify_run_plan

EXIT_OK, EXIT_INFEASIBLE = 0, 3
#: Torch threads the layers and the empty steps are timed with: ``run``'s default ``--threads`` per rank.
LAYER_THREADS = 1
#: The global batch when ``--global-batch`` is not given (the imported graph's default micro-batches, one sample each).
DEFAULT_GLOBAL_BATCH = 64
#: Configuration id of a recomputed layer (:mod:`milp_partition.joint.layers`, read by ``run``).
VANILLA, RECOMPUTE = "vanilla", "activation recomp"


def _operators(args: argparse.Namespace) -> tuple[OperatorCoefficients, str]:
    path = getattr(args, "coefficients", None)
    if path is None:
        return calibrate_operators(), "measured on this machine at solve time"
    data = parse_json(read_text_file(path), str(path))
    names = [f.name for f in fields(OperatorCoefficients)]
    if not isinstance(data, dict) or any(not isinstance(data.get(n), int | float) for n in names[:4]):
        raise InputError(f"expected a JSON object with numbers {', '.join(names[:4])}", source=str(path))
    return OperatorCoefficients(**{n: data[n] for n in names if n in data}), f"from {path}"


_Times = dict[int, dict[str, tuple[float, float]]]
_Reused = dict[int, dict[str, dict[str, float]]]


def _measured_layers(
    args: argparse.Namespace, data: Any, source: str, sizes: list[int]
) -> tuple[_Times, float, dict[int, dict[str, float]], _Reused | None, str] | None:
    """The model's own layers at each size (``--time-layers`` now, or ``--layer-times`` from an earlier result): times,
    the optimizer's seconds per parameter tensor, saved bytes per sample per size and node, the bytes a node saves again
    of an earlier node's (``None``: not recorded), and where they come from; ``None`` when the layers are priced
    operator by operator."""
    if getattr(args, "layer_times", None) is not None:
        paths = layer_time_paths(args)
        readings = [_read_layer_times(path, sizes) for path in paths]
        times, per_tensor, saved_at, reused = _median_of_results(readings, paths)
        origin = f"the model's own layers as timed in {', '.join(map(str, paths))}"
        if len(paths) > 1:
            origin += f" (the median over the {len(paths)} results)"
        return times, per_tensor, saved_at, reused, origin
    if getattr(args, "time_layers", False):
        k = calibration_launches(args)
        got = median_of([time_layers_by_size(data, source, sizes, threads=LAYER_THREADS) for _ in range(k)])
        origin = "the model's own layers timed on this CPU at each micro-batch size, saved bytes counted at each"
        if k > 1:
            origin += f" (the median of {k} timings)"
        return got.times, got.optimizer_s_per_param_tensor, got.saved_bytes_per_sample, got.reused_bytes_per_sample, origin
    return None


def layer_time_paths(args: argparse.Namespace) -> list[Path]:
    """``--layer-times RESULT [RESULT ...]``: the results whose calibrations the planner reads (the median of each
    number over them); ``[]`` when not given."""
    given = getattr(args, "layer_times", None)
    if given is None:
        return []
    return [Path(p) for p in ([given] if isinstance(given, str | Path) else given)]


T = TypeVar("T")


def _median_of_results(readings: list[T], paths: list[Path]) -> T:
    """The element-wise median of one reading per ``--layer-times`` result (:func:`median_of`); the first as it is when
    there is one.

    Raises
    ------
    InputError
        When the results measured different things (other sizes, shapes or nodes): they are not one model's
        calibrations at one global batch and device count.
    """
    if len(readings) == 1:
        return readings[0]
    try:
        return median_of(readings)
    except ValueError as exc:
        raise InputError(
            f"the results of --layer-times measured different things ({exc}): calibrate each with the same graph, "
            "--devices and --global-batch",
            source=", ".join(map(str, paths)),
        ) from None


def _with_time_layers(args: argparse.Namespace, flag: str, given: bool, what: str) -> None:
    """Refuse ``flag`` (``given``: set beyond its default) without ``--time-layers``: it shapes a calibration made now
    (``what`` it does), and ``--layer-times`` reuses one as it was recorded."""
    if given and not getattr(args, "time_layers", False):
        raise InputError(f"{what}: give --time-layers too (--layer-times reuses a calibration as it was recorded)", where=flag)


def calibration_launches(args: argparse.Namespace) -> int:
    """``--calibration-launches K``: how many times ``--time-layers`` calibrates (the planner reads the median of each
    number over them, :func:`milp_partition.run.median_of.median_of`); 1 when not given.

    Raises
    ------
    InputError
        When K > 1 is given without ``--time-layers`` (nothing is calibrated to repeat).
    """
    k = int(getattr(args, "calibration_launches", 1) or 1)
    _with_time_layers(args, "--calibration-launches", k > 1, "repeats the calibration of --time-layers")
    return k


def calibration_seconds(args: argparse.Namespace) -> float:
    """``--calibration-seconds S``: the seconds at least that each timing of the calibration lasts (0 when not given).

    Raises
    ------
    InputError
        When S > 0 is given without ``--time-layers`` (nothing is timed now).
    """
    seconds = float(getattr(args, "calibration_seconds", 0.0) or 0.0)
    _with_time_layers(args, "--calibration-seconds", seconds > 0, "spreads the timings of --time-layers over S seconds")
    return seconds


def _read_layer_times(path: Path, sizes: list[int]) -> tuple[_Times, float, dict[int, dict[str, float]], _Reused | None]:
    """The layer times a ``--time-layers`` result recorded (its ``cost_model.layer_times``), for reuse: times, the
    optimizer's seconds per parameter tensor, and saved bytes per sample per size (a result written before they were
    counted per size: its one figure per node at every size)."""
    timed = _layer_times_object(path)
    try:
        times = {int(b): {str(v): (float(ft[0]), float(ft[1])) for v, ft in t.items()} for b, t in timed["sizes"].items()}
        saved = {str(v): float(x) for v, x in (timed.get("saved_bytes_per_sample") or {}).items()}
        per_tensor = float(timed.get("optimizer_s_per_param_tensor", 0.0))
        at = timed.get("saved_bytes_per_sample_at")
        saved_at = (
            {int(b): {str(v): float(x) for v, x in t.items()} for b, t in at.items()}
            if isinstance(at, dict)
            else {b: dict(saved) for b in times}
        )
        again = timed.get("reused_bytes_per_sample_at")
        reused = (
            {int(b): {str(v): {str(u): float(x) for u, x in by.items()} for v, by in t.items()} for b, t in again.items()}
            if isinstance(again, dict)
            else None
        )
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise InputError(f"malformed cost_model.layer_times: {exc}", source=str(path)) from None
    missing = [b for b in sizes if b not in times]
    if missing:
        raise InputError(
            f"layer times at micro-batch sizes {sorted(times)}; this global batch needs {missing} too: time them with "
            "--time-layers at the same --global-batch",
            source=str(path),
        )
    return times, per_tensor, saved_at, reused


#: ``--layer-times`` results parsed in this process, by (path, size, mtime): the times, the calibrations and the
#: recorded settings are read from each result in turn, and one solve read every file three times.
_LAYER_TIMES_READ: dict[tuple[str, int, int], dict[str, Any]] = {}


def _layer_times_object(path: Path) -> dict[str, Any]:
    """A ``--layer-times`` result's ``cost_model.layer_times`` (parsed once per file and version in a process)."""
    try:
        st = path.stat()
        key: tuple[str, int, int] | None = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None  # read_text_file names the file and the reason
    got = _LAYER_TIMES_READ.get(key) if key is not None else None
    if got is not None:
        return got
    data = parse_json(read_text_file(path), str(path))
    timed = data.get("cost_model", {}).get("layer_times") if isinstance(data, dict) else None
    if not isinstance(timed, dict) or not isinstance(timed.get("sizes"), dict):
        raise InputError("no cost_model.layer_times: give the result of a solve with --time-layers", source=str(path))
    if key is not None:
        _LAYER_TIMES_READ[key] = timed
    return timed


def _read_calibrations(paths: list[Path]) -> EmptySteps | None:
    """The calibrations the ``--layer-times`` results recorded (:func:`read_calibrated_empty_steps`), the median of each
    number over them; ``None`` when none recorded one.

    Raises
    ------
    InputError
        When some recorded one and others did not (naming those), or they measured different things.
    """
    readings = [read_calibrated_empty_steps(path) for path in paths]
    found = [r for r in readings if r is not None]
    if not found:
        return None
    if len(found) < len(readings):
        lacking = [str(p) for p, r in zip(paths, readings, strict=True) if r is None]
        raise InputError(
            "recorded no calibration of the runtime (written before --time-layers measured E): give results that all record one",
            source=", ".join(lacking),
        )
    return _median_of_results(found, paths)


def read_calibrated_empty_steps(path: Path) -> EmptySteps | None:
    """The empty steps and gloo's fits a ``--time-layers`` result recorded (``cost_model.layer_times.empty_steps``,
    ``links``, ``threads``); ``None`` when it recorded none (a result written before they were measured).

    Raises
    ------
    InputError
        On a malformed entry (naming the file and the field).
    """
    timed = _layer_times_object(path)
    if "empty_steps" not in timed:
        return None
    where = "cost_model.layer_times.empty_steps"
    try:
        steps = tuple((int(p), int(d), int(m), float(e)) for p, d, m, e in timed["empty_steps"])
        links = {str(k): float(v) for k, v in (timed.get("links") or {}).items()}
        threads = int(timed.get("threads", 1))
        busy = {
            int(r): {int(b): {str(v): (float(ft[0]), float(ft[1])) for v, ft in t.items()} for b, t in by_size.items()}
            for r, by_size in (timed.get("busy") or {}).items()
        }
        tensor_steps = tuple(
            (int(p), int(d), int(t), int(m), float(e)) for p, d, t, m, e in timed.get("tensor_empty_steps") or ()
        )
        dtensor = {str(k): float(v) for k, v in (timed.get("dtensor") or {}).items()}
        ddp = tuple((int(d), int(b), float(x)) for d, b, x in timed.get("ddp_in_step") or ())
        in_step = tuple((int(b), float(kf), float(kb)) for b, kf, kb in timed.get("in_step_factors") or ())
        saved_tp = {
            int(t): {int(b): {str(v): float(x) for v, x in by.items()} for b, by in at.items()}
            for t, at in (timed.get("saved_bytes_per_sample_tp") or {}).items()
        }
        reused_tp = {
            int(t): {
                int(b): {str(v): {str(u): float(x) for u, x in by.items()} for v, by in per.items()} for b, per in at.items()
            }
            for t, at in (timed.get("reused_bytes_per_sample_tp") or {}).items()
        }
        split_times = {
            int(t): {int(b): {str(v): (float(fg[0]), float(fg[1])) for v, fg in by.items()} for b, by in at.items()}
            for t, at in (timed.get("split_times_tp") or {}).items()
        }
        split_optimizer = {
            int(t): (float(x[0]), int(x[1]), int(x[2])) for t, x in (timed.get("split_optimizer_tp") or {}).items()
        }
        optimizer_s, optimizer_tensors = timed.get("optimizer_in_step") or (0.0, 0)
        optimizer_s, optimizer_tensors = float(optimizer_s), int(optimizer_tensors)
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(
            f"expected [stages, data-parallel, micro-batches, seconds] entries: {exc}", source=str(path), where=where
        ) from None
    if any(not (e >= 0 and math.isfinite(e)) for *_, e in (*steps, *tensor_steps)):
        raise InputError("an empty step that is negative or not finite", source=str(path), where=where)
    if any(not (x >= 0 and math.isfinite(x)) or d < 2 or b < 1 for d, b, x in ddp):
        raise InputError(
            "expected [data-parallel >= 2, micro-batch size >= 1, seconds >= 0] entries",
            source=str(path),
            where="cost_model.layer_times.ddp_in_step",
        )
    if any(b < 1 or not all(k >= 0 and math.isfinite(k) for k in (kf, kb)) for b, kf, kb in in_step):
        raise InputError(
            "expected [micro-batch size >= 1, kappa_F >= 0, kappa_B >= 0] entries",
            source=str(path),
            where="cost_model.layer_times.in_step_factors",
        )
    if links and set(links) != _LINK_FIELDS:
        raise InputError(
            f"expected the fields {sorted(_LINK_FIELDS)}, got {sorted(links)}",
            source=str(path),
            where="cost_model.layer_times.links",
        )
    if any(
        not (x >= 0 and math.isfinite(x)) for at in split_times.values() for by in at.values() for fg in by.values() for x in fg
    ):
        raise InputError(
            "expected [forward, backward] seconds >= 0 per node", source=str(path), where="cost_model.layer_times.split_times_tp"
        )
    if not (optimizer_s >= 0 and math.isfinite(optimizer_s)) or optimizer_tensors < 0:
        raise InputError(
            "expected [seconds >= 0, parameter tensors >= 0]", source=str(path), where="cost_model.layer_times.optimizer_in_step"
        )
    if any(not (x >= 0 and math.isfinite(x)) for at in saved_tp.values() for by in at.values() for x in by.values()):
        raise InputError(
            "expected saved bytes per sample >= 0", source=str(path), where="cost_model.layer_times.saved_bytes_per_sample_tp"
        )
    return EmptySteps(
        steps,
        links,
        threads,
        busy,
        tensor_steps=tensor_steps,
        dtensor=dtensor,
        ddp_in_step=ddp,
        saved_at_degree=saved_tp,
        reused_at_degree=reused_tp,
        split_times=split_times,
        split_optimizer=split_optimizer,
        in_step_factors=in_step,
        optimizer_in_step_s=optimizer_s,
        optimizer_param_tensors=optimizer_tensors,
    )


#: gloo's fits a calibration records (:class:`~milp_partition.run.predict.LinkFit` less the empty step).
_LINK_FIELDS = {"p2p_alpha_s", "p2p_beta_s_per_byte", "allreduce_alpha_s", "allreduce_beta_s_per_byte"}


def _with_empty_steps(
    problem: RunPlanProblem, calibrated: EmptySteps, given: tuple[tuple[int, int, int, float], ...]
) -> RunPlanProblem:
    """``problem`` with the calibrated ``E`` per shape (``given``, from ``--empty-steps``, wins for its shapes), where
    measured gloo's point-to-point and all-reduce fits for the messages, and ``rho(d, b)`` of what DDP added to the
    model's pass (``calibrated.ddp_in_step``) beyond the fit's all-reduce of the model's bytes, per byte."""
    table = {(p, d, m): e for p, d, m, e in calibrated.steps}
    table.update({(p, d, m): e for p, d, m, e in given})
    coeffs = replace(
        problem.coefficients,
        empty_step_s=tuple((*k, e) for k, e in sorted(table.items())),
        tensor_empty_step_s=calibrated.tensor_steps,
        in_step_factors=calibrated.in_step_factors,
    )
    if calibrated.dtensor:
        dt = calibrated.dtensor
        coeffs = replace(
            coeffs,
            tensor=TensorParallelCoefficients(
                dt.get("dtensor_module_s", 0.0), dt.get("dtensor_optimizer_tensor_s", 0.0), bool(dt.get("latency_in_module"))
            ),
        )
    if calibrated.links:
        fit = calibrated.links
        coeffs = replace(
            coeffs,
            p2p_alpha_s=fit["p2p_alpha_s"],
            p2p_beta_s_per_byte=fit["p2p_beta_s_per_byte"],
            allreduce_alpha_s=fit["allreduce_alpha_s"],
            allreduce_beta_s_per_byte=fit["allreduce_beta_s_per_byte"],
        )
    weights = math.fsum(v.param_bytes for v in problem.layers)
    if calibrated.ddp_in_step and weights > 0:
        rho = []
        for d, b, added in calibrated.ddp_in_step:
            idle = ddp_allreduce_s(
                weights, d, coeffs.allreduce_alpha_s, coeffs.allreduce_beta_s_per_byte, coeffs.ddp_bucket_bytes
            )
            rho.append((d, b, max(added - idle, 0.0) / weights))
        coeffs = replace(coeffs, ddp_in_step_s_per_byte=tuple(rho))
    return replace(problem, coefficients=coeffs)


def read_empty_steps(paths: list[str]) -> tuple[tuple[int, int, int, float], ...]:
    """``(stages, data-parallel, micro-batches per replica, E seconds)`` from run.json files (``--empty-steps``): each
    run's measured empty step of its shape (``prediction.costs.empty_step_s``); one shape given twice takes the median.

    Raises
    ------
    InputError
        When a file is no run.json of a one-(d, t) plan with a measured empty step (naming the file and field).
    """
    import statistics

    found: dict[tuple[int, int, int], list[float]] = {}
    for path in paths:
        data = parse_json(read_text_file(path), str(path))
        shape = data.get("shape") if isinstance(data, dict) else None
        if not isinstance(shape, dict) or not isinstance(data.get("microbatches"), int):
            raise InputError("expected run.json from 'milp-partition run' (shape and microbatches)", source=str(path))
        p, d = shape.get("stages"), shape.get("data_parallel")
        e = (data.get("prediction") or {}).get("costs", {}).get("empty_step_s")
        if not isinstance(p, int) or not isinstance(d, int) or d < 1 or data["microbatches"] % d:
            raise InputError("malformed shape (stages, data_parallel)", source=str(path), where="shape")
        if shape.get("tensor_parallel", 1) != 1:  # its E ran the stage's DTensor pairs, which the planner prices per module
            raise InputError(
                "a tensor-parallel run's empty step holds its DTensor pairs: give runs of t = 1 (--time-layers measures "
                "E of tensor-parallel shapes)",
                source=str(path),
                where="shape.tensor_parallel",
            )
        if isinstance(e, bool) or not isinstance(e, int | float) or not e > 0 or not math.isfinite(e):
            raise InputError(
                f"no measured empty step ({e!r}): the run measured none (stages of different degrees?)",
                source=str(path),
                where="prediction.costs.empty_step_s",
            )
        found.setdefault((p, d, data["microbatches"] // d), []).append(float(e))
    return tuple((p, d, m, statistics.median(v)) for (p, d, m), v in sorted(found.items()))


def _forced_replicas(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """The forced data-parallel degree ``d`` and micro-batches per replica ``m`` (``--microbatches N`` = ``d m``)."""
    n_micro = getattr(args, "microbatches", None)
    d = getattr(args, "data_parallel", None)
    if n_micro is None:
        return d, None
    if d is None:
        raise InputError("with --objective run, --microbatches N (d m in all) needs --data-parallel D", where="--microbatches")
    if n_micro % d:
        raise InputError(f"{n_micro} micro-batches do not split over {d} replicas", where="--microbatches")
    return d, n_micro // d


def _one_source_of_times(args: argparse.Namespace) -> None:
    """Refuse a command line naming more than one source of layer times, or ``--calibration-launches`` without
    ``--time-layers`` (before anything is timed)."""
    given = [f for f in ("time_layers", "layer_times", "coefficients") if getattr(args, f, None) not in (None, False)]
    if len(given) > 1:
        raise InputError(
            "give one source of layer times: --time-layers, --layer-times or --coefficients", where=flag_name(given[1])
        )
    calibration_launches(args)
    calibration_seconds(args)


def _calibrate_now(shapes: list[tuple[int, int, int, int]], args: argparse.Namespace, model: Any) -> EmptySteps:
    """``E`` of every candidate shape, gloo's fits and the layers on busy ranks, measured now: each number the median
    over ``--calibration-launches`` calibrations."""
    return median_of(
        [
            calibrate_empty_steps(shapes, threads=LAYER_THREADS, model=model, calibration_seconds=calibration_seconds(args))
            for _ in range(calibration_launches(args))
        ]
    )


def _calibrations_recorded(args: argparse.Namespace) -> dict[str, Any]:
    """How many calibrations the planner's numbers are the median of and the seconds each spread its layer timings
    over: ``--calibration-launches`` and ``--calibration-seconds`` with ``--time-layers``; with ``--layer-times``, what its
    result recorded (1 and 0 before they were recorded)."""
    if getattr(args, "time_layers", False):
        return {
            "calibration_launches": calibration_launches(args),
            "calibration_seconds": calibration_seconds(args),
            "calibration_results": 1,
        }
    recorded = [_layer_times_object(path) for path in layer_time_paths(args)]
    return {  # several results: the planner reads the median over all their calibrations' medians
        "calibration_launches": sum(int(r.get("calibration_launches") or 1) for r in recorded),
        "calibration_seconds": min(float(r.get("calibration_seconds") or 0.0) for r in recorded),
        # the separate solves (moments) the calibrations were taken in
        "calibration_results": sum(int(r.get("calibration_results") or 1) for r in recorded),
    }


def run_problem_from_args(args: argparse.Namespace) -> tuple[RunPlanProblem, dict[str, Any]]:
    """The run-objective problem of the imported graph ``args.instance`` with the command line's cluster and batch."""
    source = str(args.instance)
    missing = [f for f, v in (("--devices K", args.devices), ("--memory SIZE", args.memory)) if v is None]
    if missing:
        raise InputError("planning an imported graph needs " + " and ".join(missing), source=source)
    data = parse_json(read_text_file(args.instance), source)
    G = args.global_batch if getattr(args, "global_batch", None) is not None else DEFAULT_GLOBAL_BATCH
    if G < 1:
        raise InputError(f"must be a positive integer, got {G}", where="--global-batch")
    model = read_layers(data, source)
    profile = load_profile_spec(args.profile or model.profile or "H100")
    coeffs = _profile_coefficients(profile)
    _one_source_of_times(args)
    sizes = [b for b in range(1, G + 1) if G % b == 0]
    measured = _measured_layers(args, data, source, sizes)
    timed: dict[str, Any] | None = None
    saved: dict[str, float] | None = None
    operators: OperatorCoefficients | None = None
    if measured is not None:
        times, per_tensor, saved_at, reused, origin = measured
        coeffs = replace(coeffs, optimizer_s_per_param_tensor=per_tensor)
        saved = {v: max(t.get(v, 0.0) for t in saved_at.values()) for v in {v for t in saved_at.values() for v in t}}
        timed = {
            "sizes": {str(b): {v: list(ft) for v, ft in t.items()} for b, t in times.items()},
            "saved_bytes_per_sample": saved,
            "saved_bytes_per_sample_at": {str(b): t for b, t in saved_at.items()},
            "reused_bytes_per_sample_at": None if reused is None else {str(b): t for b, t in reused.items()},
            "optimizer_s_per_param_tensor": per_tensor,
            "threads": LAYER_THREADS,
        }
    else:
        operators, origin = _operators(args)
    from_runs = read_empty_steps(args.empty_steps) if getattr(args, "empty_steps", None) else ()
    if from_runs:  # E per shape, from the runs' own empty-step measurements
        coeffs = replace(coeffs, empty_step_s=from_runs)
    d, m = _forced_replicas(args)
    t_forced = getattr(args, "tensor_parallel", None)
    splits, refused = offered_degrees(model, _candidate_degrees(args), profile)
    if t_forced is not None and t_forced > 1 and t_forced not in splits:
        why = refused.get(t_forced, "not among --tp-degrees")
        raise InputError(f"run cannot split this model at tensor-parallel degree {t_forced}: {why}", where="--tensor-parallel")
    if splits and measured is None:  # DTensor's overheads: from --coefficients, else measured now
        coeffs = replace(coeffs, tensor=_dtensor_costs(args))
    problem = run_problem_from_imported(
        data,
        source,
        devices=args.devices,
        memory_bytes=parse_bytes(str(args.memory), "--memory"),
        global_batch=G,
        sizes=sizes,
        coefficients=coeffs,
        operators=operators,
        times=None if measured is None else measured[0],
        saved_bytes_per_sample=saved,
        saved_bytes_per_sample_at=None if measured is None else measured[2],
        reused_bytes_per_sample_at=None if measured is None else measured[3],
        shape=RunShape(getattr(args, "stages", None), d, m, t_forced),
        splits=splits,
    )
    calibrated: EmptySteps | None = None
    if getattr(args, "time_layers", False):  # E of every candidate shape, gloo's fits, the layers on busy ranks: now
        shapes = [(p, d, m, t) for d, m, p, t in run_shapes(problem)]
        calibrated = EmptySteps((), {}, LAYER_THREADS)
        if shapes:
            calibrated = _calibrate_now(shapes, args, (data, source, G))
    elif getattr(args, "layer_times", None) is not None:
        calibrated = _read_calibrations(layer_time_paths(args))
    if calibrated is not None:
        problem = with_busy_times(_with_empty_steps(problem, calibrated, from_runs), calibrated.busy)
        problem = with_saved_at_degree(problem, calibrated.saved_at_degree, calibrated.reused_at_degree)
        problem = with_split_times(problem, calibrated.split_times)  # f_v(b, t), g_v(b, t) as timed split
        problem = _with_split_optimizer(_with_in_step_optimizer(problem, calibrated), calibrated)
        coeffs = problem.coefficients
        assert timed is not None
        timed.update(_calibration_record(calibrated), **_calibrations_recorded(args))
    if (
        splits
        and measured is not None
        and not (calibrated and calibrated.dtensor)
        and any(t > 1 for *_, t in run_shapes(problem))
    ):  # layer times recorded before DTensor was calibrated: measured now
        coeffs = replace(problem.coefficients, tensor=_dtensor_costs(args))
        problem = replace(problem, coefficients=coeffs)
    gloo = "gloo" in (profile.links["d2d"].note or "") or bool(calibrated and calibrated.links)
    links_note = "" if gloo else "not gloo's fit: for a run on CPU ranks give --profile with it (calibrate --backend numpy)"
    links_origin = f"from profile {profile.name}"
    if calibrated is not None and calibrated.links:
        origin += "; E per shape measured on CPU ranks before planning"
        links_origin = "gloo's fits measured on CPU ranks before planning"
    return problem, {
        "layer_times": timed,
        "links_note": links_note,
        "operators": asdict(operators) if operators else None,
        "operators_origin": origin,
        "profile": profile.name,
        "links_origin": links_origin,
        "tensor_parallel_refused": {str(t): why for t, why in refused.items()},
        "saved_activations_at_t": _saved_origin(problem),
        "split_passes_at_t": _split_times_origin(problem),
        **asdict(coeffs),
    }


def _origin_at_t(problem: RunPlanProblem, measured_at: str, measured: str, otherwise: str) -> dict[str, str]:
    """Per offered degree ``t > 1``: at which micro-batch sizes every layer's split cost carries its measured table
    ``measured_at`` (a :class:`~milp_partition.costmodel.tensor.SplitCost` attribute keyed by size), said as
    ``measured`` (formatted with ``t``), and ``otherwise`` at the others."""
    out: dict[str, str] = {}
    for t in problem.tensor_degrees:
        if t <= 1:
            continue
        at = sorted(set(problem.sizes).intersection(*(getattr(v.splits[t], measured_at) for v in problem.layers)))
        rest = sorted(set(problem.sizes) - set(at))
        said = f"{measured.format(t=t)} at micro-batch sizes {at}" if at else f"not {measured.split()[0]}"
        out[str(t)] = said + (f"; {otherwise} at sizes {rest}" if rest else "")
    return out


def _saved_origin(problem: RunPlanProblem) -> dict[str, str]:
    """Per offered degree ``t > 1``: where each rank's saved activations come from (measured on the ``t``-rank mesh at
    which micro-batch sizes; at the others the ``t = 1`` count, an upper bound)."""
    return _origin_at_t(
        problem, "saved_bytes_per_sample_at", "measured on one rank of the {t}-rank mesh", "the t = 1 count (an upper bound)"
    )


def _with_in_step_optimizer(problem: RunPlanProblem, calibrated: EmptySteps) -> RunPlanProblem:
    """``problem`` with the optimizer's price per parameter tensor taken from the model's own optimizer step inside
    ``run``'s step on one rank, over the calibration's seconds (:attr:`EmptySteps.optimizer_in_step_s` over its
    parameter tensors), where it was timed; else as the layer timer measured it back to back at the largest size."""
    seconds, tensors = calibrated.optimizer_in_step_s, calibrated.optimizer_param_tensors
    if not (seconds > 0 and tensors > 0):
        return problem
    weights = math.fsum(v.param_bytes for v in problem.layers)  # the per-byte part stays as the cost model prices it
    per_tensor = (seconds - weights * problem.coefficients.optimizer_s_per_param_byte) / tensors
    return replace(problem, coefficients=replace(problem.coefficients, optimizer_s_per_param_tensor=max(per_tensor, 0.0)))


def _with_split_optimizer(problem: RunPlanProblem, calibrated: EmptySteps) -> RunPlanProblem:
    """``problem`` with DTensor's optimizer overhead per DTensor parameter taken from the split model's own optimizer step
    where the calibration timed it (:attr:`EmptySteps.split_optimizer`): at degree ``t``, ``(O_t - n o_opt - W_t k_opt) /
    n_dt`` (``O_t`` the step on one rank of the split model's ``n`` parameter tensors, ``n_dt`` of them DTensors,
    ``W_t`` its share of the parameter bytes; ``o_opt``, ``k_opt`` the plain step's per tensor and per byte, as the cost
    model prices them), never below 0; the median over the degrees timed.  Else the overhead stays as measured on tiny
    modules of a one-rank mesh."""
    c = problem.coefficients
    found = []
    for t, (seconds, tensors, dtensors) in sorted(calibrated.split_optimizer.items()):
        if dtensors <= 0 or t not in problem.tensor_degrees:
            continue
        weights = math.fsum(v.split_at(t).param_bytes for v in problem.layers)
        plain = tensors * c.optimizer_s_per_param_tensor + weights * c.optimizer_s_per_param_byte
        found.append(max(seconds - plain, 0.0) / dtensors)
    if not found:
        return problem
    tensor = replace(c.tensor, dtensor_optimizer_tensor_s=statistics.median(found))
    return replace(problem, coefficients=replace(c, tensor=tensor))


def _split_times_origin(problem: RunPlanProblem) -> dict[str, str]:
    """Per offered degree ``t > 1``: where each layer's passes come from (timed split on the ``t``-rank mesh at which
    micro-batch sizes; at the others the analytic price of :mod:`milp_partition.costmodel.tensor`)."""
    return _origin_at_t(problem, "forward_s_at", "timed split on the {t}-rank mesh", "the analytic price")


def _calibration_record(calibrated: EmptySteps) -> dict[str, Any]:
    """What ``--time-layers`` measured before planning, as ``cost_model.layer_times`` records it (read back by
    :func:`read_calibrated_empty_steps` for ``--layer-times``)."""
    return {
        "empty_steps": [list(x) for x in calibrated.steps],
        "tensor_empty_steps": [list(x) for x in calibrated.tensor_steps],
        "dtensor": calibrated.dtensor,
        "links": calibrated.links,
        "threads": calibrated.threads,
        "ddp_in_step": [list(x) for x in calibrated.ddp_in_step],
        # one rank: the passes inside run's step over the layer timer's, per size (run/inrun.py; busy["1"] holds them)
        "in_step_factors": [list(x) for x in calibrated.in_step_factors],
        # one rank: the model's optimizer step inside run's step (seconds, the median over the rounds) and its tensors
        "optimizer_in_step": [calibrated.optimizer_in_step_s, calibrated.optimizer_param_tensors],
        # each layer's saved bytes per sample on one rank of a t-rank mesh, as run counts them (t -> size -> node)
        "saved_bytes_per_sample_tp": {
            str(t): {str(b): by for b, by in at.items()} for t, at in calibrated.saved_at_degree.items()
        },
        "reused_bytes_per_sample_tp": {
            str(t): {str(b): by for b, by in at.items()} for t, at in calibrated.reused_at_degree.items()
        },
        # the split model's optimizer step on one rank, its parameter tensors, its DTensors (t -> [s, n, n_dt])
        "split_optimizer_tp": {str(t): list(x) for t, x in calibrated.split_optimizer.items()},
        # each layer's (forward, backward) seconds split over a t-rank mesh as run splits it (t -> size -> node)
        "split_times_tp": {
            str(t): {str(b): {v: list(fg) for v, fg in by.items()} for b, by in at.items()}
            for t, at in calibrated.split_times.items()
        },
        "busy": {
            str(r): {str(b): {v: list(ft) for v, ft in t.items()} for b, t in by_size.items()}
            for r, by_size in calibrated.busy.items()
        },
    }


def _profile_coefficients(profile: Any) -> RunCoefficients:
    """The profile's links as the run's coefficients: its device-to-device link for messages, its ring all-reduce over
    two ranks as one alpha + bytes beta (the run's fit)."""
    link = profile.links["d2d"]
    return RunCoefficients(
        p2p_alpha_s=link.alpha_s,
        p2p_beta_s_per_byte=link.beta_s_per_byte,
        allreduce_alpha_s=2 * profile.allreduce.alpha_s,
        allreduce_beta_s_per_byte=profile.allreduce.beta_s_per_byte,
    )


def _candidate_degrees(args: argparse.Namespace) -> list[int]:
    """The tensor-parallel degrees to offer: ``--tp-degrees``, else ``--tensor-parallel``, else ``2..k``."""
    if getattr(args, "tp_degrees", None) is not None:
        return list(parse_tp_degrees(str(args.tp_degrees)))
    if getattr(args, "tensor_parallel", None) is not None:
        return [int(args.tensor_parallel)]
    return list(range(2, int(args.devices) + 1))


def _dtensor_costs(args: argparse.Namespace) -> TensorParallelCoefficients:
    """DTensor's overheads: the ``--coefficients`` file's ``dtensor_module_s`` and ``dtensor_optimizer_tensor_s`` when it
    has both, else measured now on a one-rank gloo mesh (:func:`milp_partition.run.predict.calibrate_runtime`)."""
    path = getattr(args, "coefficients", None)
    if path is not None:
        data = parse_json(read_text_file(path), str(path))
        names = ("dtensor_module_s", "dtensor_optimizer_tensor_s")
        if isinstance(data, dict) and all(isinstance(data.get(n), int | float) and data[n] >= 0 for n in names):
            return TensorParallelCoefficients(float(data[names[0]]), float(data[names[1]]))
    costs = calibrate_runtime(LAYER_THREADS)
    return TensorParallelCoefficients(costs.dtensor_module_s, costs.dtensor_optimizer_tensor_s)


def cmd_solve_run(args: argparse.Namespace) -> int:
    """Solve, verify, print the report, write the JSON; exit 0, or 3 when no plan fits."""
    for flag in ("space", "export", "export_to", "global_batch_size"):
        if getattr(args, flag, None) is not None:
            raise InputError(
                "applies to --objective piper plans only (the run objective's plans are run, not exported)", where=flag_name(flag)
            )
    start = time.perf_counter()
    problem, costs = run_problem_from_args(args)
    found = solve_run_dp(problem, args.common.time_limit_s)
    seconds = time.perf_counter() - start
    report = verify_run_plan(problem, found.plan) if found.plan is not None else None
    if found.plan is not None and (report is None or not report.feasible):  # the DP's plan must pass the verifier
        raise RuntimeError(f"the run-objective DP returned a plan the verifier rejects: {report and report.violations}")
    status = "infeasible" if found.plan is None and found.complete else "optimal" if found.complete else "feasible"
    if found.plan is None and not found.complete:
        status = "unknown"
    out: dict[str, Any] = {
        "problem": "joint",
        "objective_name": "step_s",
        "status": status,
        "objective": None if report is None else report.step_s,
        "bound": found.bound_s if found.complete else None,
        "solve_seconds": seconds,
        "instance": {"source": str(args.instance), "global_batch": problem.global_batch, "devices": problem.devices},
        "cost_model": costs,
        "stages": [],
    }
    if report is not None and found.plan is not None:
        plan = found.plan
        n = plan.data_parallel * plan.microbatches
        out["instance"].update(microbatches=n, microbatch_size=report.microbatch_size)
        out["time_per_sample"] = report.step_s / n  # run's planner_step_s = time_per_sample x N = the step
        pred = report.prediction
        assert pred is not None
        for q, ((i, e), mem) in enumerate(zip(plan.stages, report.memory, strict=True)):
            nodes = [v.id for v in problem.layers[i:e]]
            st = pred.stages[q]
            out["stages"].append(
                {
                    "nodes": nodes,
                    "data_parallel": plan.data_parallel,
                    "tensor_parallel": plan.tensor_parallel,
                    "configs": {v: RECOMPUTE if v in plan.recomputed else VANILLA for v in nodes},
                    "memory_bytes": mem.total_bytes,
                    "memory_terms": asdict(mem),
                    "unit_s": st.unit_s,
                    "tail_s": st.tail_s,
                    "terms_s": asdict(st),  # forward, backward, send, all-reduce, optimizer: as run.json's prediction
                }
            )
        # E of the plan's shape as priced (the runtime's own step with nothing to compute; 0 when not calibrated)
        out["empty_step_s"] = problem.coefficients.fixed_for(
            len(plan.stages), plan.data_parallel, plan.microbatches, plan.tensor_parallel
        )
    if args.output is not None:
        write_text_atomic(Path(args.output), json.dumps(out, indent=2) + "\n")
    print(format_run_report(out, found.shapes) if not args.quiet else f"{status} objective={fmt(out['objective'], 12)} s")
    return EXIT_INFEASIBLE if status == "infeasible" else EXIT_OK


def format_run_report(out: dict[str, Any], shapes: int) -> str:
    """The report: status, the step of the global batch (seconds), the shape and the stages."""
    inst = out["instance"]
    lines = [
        f"instance   {inst['source']}  (global batch {inst['global_batch']}, {inst['devices']} devices)",
        "problem    joint, objective run: the step of the global batch as 'run' executes it (1F1B, costmodel)",
        f"costs      operators {out['cost_model']['operators_origin']}; links {out['cost_model']['links_origin']}",
        f"status     {out['status'].upper()}  ({shapes} shapes enumerated)",
    ]
    if out["cost_model"]["links_note"]:
        lines.append(f"note       links {out['cost_model']['links_note']}")
    if out["objective"] is None:
        if out["status"] == "infeasible" and shapes == 0:
            lines.append(
                "objective  no shape to try: the devices and the forced --stages, --data-parallel, --tensor-parallel and "
                "--microbatches leave none that run executes (1F1B needs a micro-batch per stage on each replica, "
                "and with data parallelism over 2 or more stages more than one; the micro-batch size must be timed)"
            )
        else:
            lines.append(
                "objective  no plan fits the devices' memory" if out["status"] == "infeasible" else "objective  none found"
            )
        return "\n".join(lines)
    lines.append(f"objective  step = {fmt(out['objective'], 12)} s   (verified; global batch of {inst['global_batch']} samples)")
    if out["bound"] is not None:
        lines.append(f"bound      {fmt(out['bound'], 12)} s (exhaustive DP)")
    st0 = out["stages"][0]
    lines.append(
        f"shape      {len(out['stages'])} stages x d = {st0['data_parallel']} x t = {st0['tensor_parallel']}, "
        f"{inst['microbatches'] // st0['data_parallel']} micro-batches of {inst['microbatch_size']} samples per replica"
    )
    lines.append("stage  nodes  unit (s)      tail (s)      memory  recomputed  layers")
    for q, st in enumerate(out["stages"]):
        rec = sum(1 for c in st["configs"].values() if c == RECOMPUTE)
        lines.append(
            f"{q + 1:5d} {len(st['nodes']):6d}  {fmt(st['unit_s'], 6):>12s}  {fmt(st['tail_s'], 6):>12s} "
            f"{fmt_bytes(st['memory_bytes']):>10s}  {rec:10d}  {names_span(st['nodes'])}"
        )
    return "\n".join(lines)
