"""What a run needs from a plan and its imported graph, read without torch (:class:`RunSpec`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.joint.run_dp import ddp_pipeline_runs

#: The configuration id of a recomputed layer (:mod:`milp_partition.joint.layers`).
RECOMPUTE_PREFIX = "activation recomp"


@dataclass(frozen=True)
class RunStage:
    """One stage of the plan: its forward nodes (module paths), degrees and the recomputed nodes."""

    nodes: tuple[str, ...]
    data_parallel: int
    tensor_parallel: int
    recomputed: tuple[str, ...] = ()
    predicted_memory_bytes: float = 0.0
    microbatches_in_flight: int = 0


@dataclass(frozen=True)
class RunSpec:
    """A plan made runnable: the model's reference and inputs, the stages, the batch and the prediction.

    Attributes
    ----------
    model
        ``MODULE:FACTORY`` of the import.
    inputs
        The import's ``--input`` specs (their first dimension is the import's batch, replaced by the run's).
    dtype
        The import's floating-point dtype.
    node_order
        The forward nodes in the import's (execution) order.
    microbatches
        ``N``: micro-batches per batch (over all data-parallel replicas).
    predicted_step_s
        The plan's ``time_per_sample`` times ``N`` (the objective under the profile it was planned with: under
        ``--objective run`` the step of the global batch).
    microbatch_size
        ``b``: samples per micro-batch (the run objective's decision; Piper's plans: one). The global batch is ``N b``.
    graph
        The imported graph file (parsed JSON), for the tensor-parallel roles.
    """

    model: str
    inputs: tuple[str, ...]
    dtype: str
    stages: tuple[RunStage, ...]
    node_order: tuple[str, ...]
    microbatches: int
    predicted_step_s: float
    optimizer_state_factor: float
    graph_path: str
    plan_path: str
    graph: dict[str, Any] = field(repr=False, default_factory=dict)
    microbatch_size: int = 1

    @property
    def global_batch(self) -> int:
        """Samples per step, ``N b``."""
        return self.microbatches * self.microbatch_size

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(stages, data-parallel, tensor-parallel)`` of the first stage (of every stage when :attr:`uniform`)."""
        return len(self.stages), self.stages[0].data_parallel, self.stages[0].tensor_parallel

    @property
    def degrees(self) -> tuple[tuple[int, int], ...]:
        """Each stage's ``(data-parallel, tensor-parallel)`` degrees."""
        return tuple((st.data_parallel, st.tensor_parallel) for st in self.stages)

    @property
    def uniform(self) -> bool:
        """Whether every stage has the same degrees (a ``(pp, dp, tp)`` device mesh; else :mod:`.mixed` runs it)."""
        return len(set(self.degrees)) == 1

    @property
    def world_size(self) -> int:
        """The plan's devices, ``sum_q d_q t_q``."""
        return sum(d * t for d, t in self.degrees)


def _load(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", source=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON (line {exc.lineno}): {exc.msg}", source=str(path)) from exc


def _graph_path(plan_path: Path, plan: dict[str, Any], graph: str | None) -> Path:
    if graph is not None:
        return Path(graph)
    source = str(plan.get("instance", {}).get("source") or "")
    if not source:
        raise InputError("the plan names no instance.source; give the imported graph with --graph", source=str(plan_path))
    for candidate in (Path(source), plan_path.parent / source):
        if candidate.is_file():
            return candidate
    raise InputError(
        f"the plan's graph {source!r} is not found (here or beside the plan); give it with --graph", source=str(plan_path)
    )


#: The bundled test models' module: its factories are the tool's own code, run without ``--factory``.
TRUSTED_FACTORY_MODULE = "milp_partition.importers.models"


def check_factory(reference: str, factory: str | None, graph_path: str) -> str:
    """The ``MODULE:FACTORY`` to build the model from: ``factory`` (``--factory``), which must match the graph's.

    A graph or plan file is data: the code it names (``reference``) is imported and called only when the user
    names the same factory on the command line, or when it is one of the bundled test models
    (:data:`TRUSTED_FACTORY_MODULE`).

    Raises
    ------
    InputError
        When ``--factory`` names another factory than the graph records, or none is given for a factory
        outside the bundled models (naming the flag to give).
    """
    if factory is not None:
        if factory.strip() != reference.strip():
            raise InputError(
                f"--factory {factory} is not the factory this graph was imported from ({reference}); "
                "import the model again with --factory's factory, or give --graph of its import",
                source=graph_path,
                where="layers.model.reference",
            )
        return factory
    module = reference.rpartition(":")[0]
    if module != TRUSTED_FACTORY_MODULE:
        raise InputError(
            f"the graph names the model factory {reference!r}: run imports and calls a factory only when you name it; "
            f"if it is code you trust, give --factory {reference}",
            source=graph_path,
            where="layers.model.reference",
        )
    return reference


def _positive_int(value: Any, source: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"must be a positive whole number, got {value!r}", source=source, where=where)
    return value


def _stage(st: Any, q: int, source: str) -> RunStage:
    """Stage ``q`` (from 1) of the plan, its fields checked."""
    at = f"stages[{q - 1}]"
    if not isinstance(st, dict):
        raise InputError(f"must be an object (a stage), got {type(st).__name__}", source=source, where=at)
    nodes = st.get("nodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(v, str) for v in nodes):
        raise InputError("must be a non-empty list of node ids", source=source, where=f"{at}.nodes")
    configs = st.get("configs")
    if not isinstance(configs, dict) or not all(isinstance(c, str) for c in configs.values()):
        raise InputError("must be an object node id -> configuration id", source=source, where=f"{at}.configs")
    if set(configs) != set(nodes):
        odd = sorted(set(configs) ^ set(nodes))[:5]
        raise InputError(f"must name the stage's nodes exactly (differs at {odd})", source=source, where=f"{at}.configs")
    memory = st.get("memory_bytes", 0.0)
    if isinstance(memory, bool) or not isinstance(memory, (int, float)) or not math.isfinite(memory) or memory < 0:
        raise InputError(f"must be a finite number of bytes, got {memory!r}", source=source, where=f"{at}.memory_bytes")
    in_flight = st.get("microbatches_in_flight", 0)
    if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 0:
        raise InputError(
            f"must be a whole number, not negative, got {in_flight!r}", source=source, where=f"{at}.microbatches_in_flight"
        )
    return RunStage(
        tuple(nodes),
        _positive_int(st.get("data_parallel"), source, f"{at}.data_parallel"),
        _positive_int(st.get("tensor_parallel"), source, f"{at}.tensor_parallel"),
        tuple(v for v in nodes if configs[v].startswith(RECOMPUTE_PREFIX)),
        float(memory),
        in_flight,
    )


def _check_nodes(stages: list[RunStage], forward: list[str], source: str) -> None:
    """Every forward node of the graph in exactly one stage, none other; stages in execution order."""
    order = {v: i for i, v in enumerate(forward)}
    seen: dict[str, int] = {}
    for q, st in enumerate(stages, start=1):
        for v in st.nodes:
            if v not in order:
                raise InputError(f"node {v!r} is not in the graph", source=source, where=f"stages[{q - 1}].nodes")
            if v in seen:
                raise InputError(
                    f"node {v!r} is in stage {seen[v]} and in stage {q}", source=source, where=f"stages[{q - 1}].nodes"
                )
            seen[v] = q
    missing = [v for v in forward if v not in seen]
    if missing:
        raise InputError(f"{len(missing)} node(s) of the graph are in no stage: {missing[:5]}", source=source, where="stages")
    firsts = []  # each stage's first module (the run cuts there; 'top' nodes are the model's own operations)
    for q, st in enumerate(stages, start=1):
        modules = [order[v] for v in st.nodes if not v.startswith("top")]
        if not modules and q > 1:
            raise InputError(
                f"stage {q} holds no module to cut the model at (only {list(st.nodes)})", source=source, where="stages"
            )
        firsts.append(min(modules or [order[v] for v in st.nodes]))
    for q in range(1, len(firsts)):
        if firsts[q] <= firsts[q - 1]:
            raise InputError(
                f"stage {q + 1} starts (at {forward[firsts[q]]!r}) before stage {q} (at {forward[firsts[q - 1]]!r}) "
                "in the model's execution order: the stages must come in that order",
                source=source,
                where="stages",
            )


def _check_shape(stages: list[RunStage], n: int, source: str) -> None:
    """Each stage's data-parallel degree divides the ``N`` micro-batches; where every stage has the same ``(d, t)`` (one
    ``(pp, dp, tp)`` mesh, torch's 1F1B schedule) ``N / d >= S``, and not ``N / d = S`` with ``S >= 2`` stages under DDP
    (``d >= 2``, ``t = 1``: torch's DDP reducer asserts there, :func:`milp_partition.joint.run_dp.ddp_pipeline_runs`).
    Stages of different degrees run on the project's own
    1F1B schedule (:mod:`milp_partition.run.mixed`), data and tensor parallelism together on a 2-D mesh."""
    for q, st in enumerate(stages, start=1):
        if n % st.data_parallel:
            raise InputError(
                f"stage {q}: data-parallel degree {st.data_parallel} does not divide the plan's {n} micro-batches: "
                f"solve with --microbatches a multiple of {st.data_parallel}",
                source=source,
                where="instance.microbatches",
            )
    degrees = {(s.data_parallel, s.tensor_parallel) for s in stages}
    if len(degrees) == 1:
        d, s = stages[0].data_parallel, len(stages)
        if n // d < s:
            raise InputError(
                f"{n} micro-batches do not run on data-parallel degree {d} and {s} stages (1F1B needs at least {s} per "
                f"replica): solve with --microbatches {d * s} or more",
                source=source,
                where="instance.microbatches",
            )
        if not ddp_pipeline_runs(s, d, n // d, stages[0].tensor_parallel):
            raise InputError(
                f"{n} micro-batches on data-parallel degree {d} are {s} per replica on {s} stages: torch's DDP inside its "
                f"1F1B schedule fails when each replica has exactly one micro-batch per stage (its reducer asserts in "
                f"the second step): solve with --microbatches {d * (s + 1)} or more",
                source=source,
                where="instance.microbatches",
            )


def _check_devices(stages: list[RunStage], instance: dict[str, Any], source: str) -> None:
    """The stages use no more devices than the plan was solved for, and tensor-parallel degrees it offered."""
    used = sum(st.data_parallel * st.tensor_parallel for st in stages)
    devices, degrees = instance.get("devices"), instance.get("degrees")
    if isinstance(devices, int) and not isinstance(devices, bool) and used > devices:
        per = " + ".join(f"{st.data_parallel} x {st.tensor_parallel}" for st in stages)
        raise InputError(
            f"the stages use {per} = {used} devices and the plan was solved for {devices}: "
            "solve the plan again rather than editing its degrees",
            source=source,
            where="stages",
        )
    for q, st in enumerate(stages):
        if isinstance(degrees, list) and degrees and st.tensor_parallel not in degrees:
            raise InputError(
                f"tensor-parallel degree {st.tensor_parallel} is not among the plan's degrees {degrees}: solve the plan "
                "again with --tp-degrees",
                source=source,
                where=f"stages[{q}].tensor_parallel",
            )


def read_run_spec(plan_path: str | Path, graph: str | None = None, factory: str | None = None) -> RunSpec:
    """The :class:`RunSpec` of a ``solve --problem joint`` result on a graph written by ``milp-partition import torch``.

    ``factory``: the ``MODULE:FACTORY`` the user named (``--factory``), see :func:`check_factory`.

    Raises
    ------
    InputError
        When the plan is no joint result or a field is malformed (naming it), the graph records no model reference
        (imported before ``run`` existed, or from ONNX), the stages do not hold each node of the graph once in
        execution order, a stage's data-parallel degree does not divide the micro-batches, the micro-batch size is not
        a positive whole number, or the factory is not the user's.
    """
    plan_path = Path(plan_path)
    source = str(plan_path)
    plan = _load(plan_path, "plan")
    if not isinstance(plan, dict) or plan.get("problem") != "joint" or not isinstance(plan.get("stages"), list):
        raise InputError("expected the JSON result of 'solve --problem joint' with a plan (stages)", source=source)
    if not plan["stages"]:
        raise InputError("the plan has no stages (no solution to run)", source=source, where="stages")
    instance = plan.get("instance")
    if not isinstance(instance, dict):
        raise InputError("must be an object (the solved instance's settings)", source=source, where="instance")
    n = _positive_int(instance.get("microbatches"), source, "instance.microbatches")
    gpath = _graph_path(plan_path, plan, graph)
    data = _load(gpath, "imported graph")
    found = data.get("layers") if isinstance(data, dict) else None
    layers: dict[str, Any] = found if isinstance(found, dict) else {}
    model = layers.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("reference"), str) or not isinstance(model.get("inputs"), list):
        raise InputError(
            "the graph records no model reference: import it again with 'milp-partition import torch' (this version)",
            source=str(gpath),
        )
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(v, dict) and "id" in v for v in nodes):
        raise InputError("must be a list of node objects with ids", source=str(gpath), where="nodes")
    forward = [str(v["id"]) for v in nodes if not str(v["id"]).endswith(":bwd")]
    stages = [_stage(st, q, source) for q, st in enumerate(plan["stages"], start=1)]
    _check_nodes(stages, forward, source)
    _check_shape(stages, n, source)
    _check_devices(stages, instance, source)
    reference = check_factory(str(model["reference"]), factory, str(gpath))
    size = _positive_int(instance.get("microbatch_size", 1), source, "instance.microbatch_size")
    tps = plan.get("time_per_sample")
    if tps is None:
        tps = plan.get("objective")
    predicted = float(tps) * n if isinstance(tps, (int, float)) and not isinstance(tps, bool) else float("nan")
    factor = layers.get("optimizer_state_bytes_per_param_byte", 0.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor < 0:
        raise InputError(
            f"must be a finite number, not negative, got {factor!r}",
            source=str(gpath),
            where="layers.optimizer_state_bytes_per_param_byte",
        )
    return RunSpec(
        model=reference,
        inputs=tuple(str(s) for s in model["inputs"]),
        dtype=str(layers.get("dtype") or "float32"),
        stages=tuple(stages),
        node_order=tuple(forward),
        microbatches=n,
        predicted_step_s=predicted,
        optimizer_state_factor=float(factor),
        graph_path=str(gpath),
        plan_path=source,
        graph=data,
        microbatch_size=size,
    )
