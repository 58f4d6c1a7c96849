"""What a run needs from a plan and its imported graph, read without torch (:class:`RunSpec`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError

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
        ``N``: micro-batches per batch, one sample each (the planner's unit).
    predicted_step_s
        The plan's time per sample times ``N`` (the objective under the profile it was planned with).
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

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(stages, data-parallel, tensor-parallel)``; the run needs one d and one t for every stage."""
        return len(self.stages), self.stages[0].data_parallel, self.stages[0].tensor_parallel

    @property
    def world_size(self) -> int:
        s, d, t = self.shape
        return s * d * t


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


def read_run_spec(plan_path: str | Path, graph: str | None = None) -> RunSpec:
    """The :class:`RunSpec` of a ``solve --problem joint`` result on a graph written by ``milp-partition import torch``.

    Raises
    ------
    InputError
        When the plan is no joint result, the graph records no model reference (imported before
        ``run`` existed, or from ONNX), or the stages do not share one data- and one tensor-parallel degree.
    """
    plan_path = Path(plan_path)
    plan = _load(plan_path, "plan")
    if not isinstance(plan, dict) or plan.get("problem") != "joint" or not plan.get("stages"):
        raise InputError("expected the JSON result of 'solve --problem joint' with a plan (stages)", source=str(plan_path))
    gpath = _graph_path(plan_path, plan, graph)
    data = _load(gpath, "imported graph")
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict) or not isinstance(layers.get("model"), dict):
        raise InputError(
            "the graph records no model reference: import it again with 'milp-partition import torch' (this version)",
            source=str(gpath),
        )
    model = layers["model"]
    forward = [str(n["id"]) for n in data.get("nodes", []) if not str(n["id"]).endswith(":bwd")]
    stages = []
    for st in plan["stages"]:
        recomputed = tuple(v for v, c in st["configs"].items() if str(c).startswith(RECOMPUTE_PREFIX))
        stages.append(
            RunStage(
                tuple(str(v) for v in st["nodes"]),
                int(st["data_parallel"]),
                int(st["tensor_parallel"]),
                recomputed,
                float(st.get("memory_bytes", 0.0)),
            )
        )
    degrees = {(s.data_parallel, s.tensor_parallel) for s in stages}
    if len(degrees) != 1:
        raise InputError(
            f"the run needs one data- and one tensor-parallel degree for every stage (a (pp, dp, tp) mesh); "
            f"the plan has {sorted(degrees)}: force one with solve --data-parallel D",
            source=str(plan_path),
        )
    n = int(plan["instance"]["microbatches"])
    size = plan["instance"].get("microbatch_size", 1)
    if size != 1:
        raise InputError(
            f"the plan's micro-batches hold {size} samples; run executes micro-batches of one sample: plan again with "
            f"--microbatches {plan['instance'].get('global_batch', n * size)} and --data-parallel D (one sample each)",
            source=str(plan_path),
        )
    tps = plan.get("time_per_sample")
    if tps is None:
        tps = plan.get("objective")
    return RunSpec(
        model=str(model["reference"]),
        inputs=tuple(str(s) for s in model["inputs"]),
        dtype=str(layers.get("dtype") or "float32"),
        stages=tuple(stages),
        node_order=tuple(forward),
        microbatches=n,
        predicted_step_s=float(tps) * n if tps is not None else float("nan"),
        optimizer_state_factor=float(layers.get("optimizer_state_bytes_per_param_byte", 0.0)),
        graph_path=str(gpath),
        plan_path=str(plan_path),
        graph=data,
    )
