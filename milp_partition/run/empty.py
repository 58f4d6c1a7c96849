"""The runtime's own step per plan shape, measured before planning: ``E`` of :mod:`milp_partition.costmodel`.

``E`` is the step of a plan's shape (``p`` stages, data-parallel degree ``d``, ``m`` micro-batches per replica) with
nothing to compute: torch's ``Schedule1F1B`` over ``m`` micro-batches of a tiny linear module per stage, DDP over
``d`` replicas, on CPU ranks with gloo (:func:`milp_partition.run.predict.empty_step`, the very function ``run``
measures its own ``E`` with, on the same kind of process group and mesh). It holds what the layers' times leave out:
the schedule's bookkeeping, every message's latency, waking the other rank, DDP's hooks and one bucket's all-reduce.
:func:`calibrate_empty_steps` launches one group of ``p d`` ranks per rank count (the run's launcher,
:func:`milp_partition.run.launch.run_ranks`), measures every shape of that count in it, and, with two ranks or more,
gloo's point-to-point and all-reduce fits in the same group (:func:`milp_partition.run.predict.measure_links`).
Given the model, every rank of a group of two or more then times the model's own layers at the micro-batch sizes of
that group's shapes, all ranks in step (:func:`milp_partition.run.predict.time_layers_in_lockstep`, a barrier before
every pass): a plan of ``p d`` ranks shares the machine's cores and memory bandwidth among them, and its layers run at
the speed they have then, not alone (the run's own prediction times them so, inside the run).  Each pass is priced by
its slowest rank (:func:`slowest_rank_layers`), as a step waits for it.  (Before: one barrier per size and the mean
over the ranks; the ranks drifted apart and part of their passes ran alone: docs/import.md, issue 42's diagnosis.)
The group of one rank times the layers inside ``run``'s own step instead (:func:`milp_partition.run.inrun.
time_layers_in_step`: the layer timer scaled to the passes of ``Schedule1F1B``'s step at each size, less the empty
step's own), what a one-rank plan's layers cost as it runs.

A tensor-parallel shape ``(p, d, m, t)`` (``t > 1``) runs on ``p d t`` ranks over a ``(p, d, t)`` mesh, without DDP (as
``run`` runs it: DDP takes no DTensor) and with nothing split (DTensor's hooks and the activation all-reduces are priced
per split module); the same shape is measured again with :data:`TP_PAIRS` column / row pairs of tiny linear modules
on the tensor-parallel mesh (as ``run`` measures its own ``E`` with the stage's pairs): the difference over the pairs
and the micro-batches is ``o_dt`` of :mod:`milp_partition.costmodel.tensor` (DTensor's cost per split module, each
pair's forward and backward all-reduce latency in it; the median over the shapes).  Given the model, the same group
splits it over each ``t``-rank mesh as ``run`` splits it and counts what each layer saves on one rank at the sizes of
the shapes with that ``t`` (:mod:`milp_partition.run.tp_saved`; the largest over the ranks), what the cost model reads
as ``a_v(t, b)``, and times each layer's forward and backward split so, every rank computing at once, each pass by its
slowest rank (:mod:`milp_partition.run.tp_timed`), what the cost model reads as ``f_v(b, t)``, ``g_v(b, t)`` in place of
the analytic price (their DTensor hooks and activation all-reduces are in them: ``o_dt`` then prices only layers not
timed).  DTensor's optimizer overhead per
parameter is measured on each rank's one-rank mesh (:func:`milp_partition.run.predict.calibrate_runtime`, as ``run``
does before its steps).

Torch is imported inside the functions.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from milp_partition.io.atomic import write_atomic
from milp_partition.joint.run_dp import ddp_pipeline_runs
from milp_partition.run.engine import set_parent_death_signal
from milp_partition.run.inrun import time_layers_in_step
from milp_partition.run.interleave import interleaved_rounds
from milp_partition.run.launch import run_ranks
from milp_partition.run.pinning import pin_rank
from milp_partition.run.predict import EmptyStep, calibrate_runtime, measure_links, time_layers_in_lockstep
from milp_partition.run.tp_saved import saved_at_degree
from milp_partition.run.tp_timed import time_split_layers_in_lockstep

#: Column / row pairs of tiny linear modules in the empty step that measures DTensor's cost per module on a ``t``-rank mesh.
TP_PAIRS = 4


@dataclass(frozen=True)
class EmptySteps:
    """What :func:`calibrate_empty_steps` measured.

    Attributes
    ----------
    steps
        ``(stages, data-parallel, micro-batches per replica, E seconds)`` per shape (the mean over the shape's ranks of
        each rank's median, as run.json's ``prediction.costs.empty_step_s``).
    links
        gloo's fits in a group of the largest rank count measured (the fields of
        :class:`milp_partition.run.predict.LinkFit` without ``empty_step_s``); empty when every shape has one rank.
    threads
        The torch threads each rank ran with (``run --threads``).
    busy
        Ranks -> micro-batch size -> node -> (forward, backward) seconds, timed with that many ranks in step (each
        pass's slowest rank, :func:`slowest_rank_layers`); at one rank, the layers scaled to the passes inside ``run``'s
        own step (:mod:`milp_partition.run.inrun`); empty without the model.
    ddp_in_step
        ``(d, micro-batch size, seconds)``: what ``DistributedDataParallel`` over ``d`` ranks added to one forward and
        backward pass of the whole model, every rank in step (:func:`ddp_added_s`); the cost model turns it into a
        price per parameter byte beyond gloo's idle fit (:attr:`milp_partition.costmodel.plan.RunCoefficients.
        ddp_in_step_s_per_byte`).  Empty without the model.
    """

    steps: tuple[tuple[int, int, int, float], ...]
    links: dict[str, float]
    threads: int = 1
    busy: dict[int, dict[int, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    #: ``(stages, data-parallel, tensor-parallel t > 1, micro-batches per replica, E seconds)`` per tensor-parallel shape.
    tensor_steps: tuple[tuple[int, int, int, int, float], ...] = ()
    #: DTensor's overheads (:class:`milp_partition.run.predict.TorchCosts`' fields), measured where a shape has ``t > 1``.
    dtensor: dict[str, float] = field(default_factory=dict)
    ddp_in_step: tuple[tuple[int, int, float], ...] = ()
    #: Degree ``t > 1`` -> micro-batch size -> node -> the bytes per sample the node saves on one rank of a ``t``-rank mesh,
    #: the model split as ``run`` splits it, counted as run.json counts them (the largest over the ranks;
    #: :mod:`milp_partition.run.tp_saved`); at the sizes of the shapes with that ``t``.  Empty without the model.
    saved_at_degree: dict[int, dict[int, dict[str, float]]] = field(default_factory=dict)
    #: Degree ``t > 1`` -> size -> node -> earlier node -> bytes per sample the node saves again of the earlier's, likewise.
    reused_at_degree: dict[int, dict[int, dict[str, dict[str, float]]]] = field(default_factory=dict)
    #: Degree ``t > 1`` -> size -> node -> (forward, backward) seconds of the node split over a ``t``-rank mesh as ``run``
    #: splits it, every rank computing at once, each pass priced by its slowest rank (:func:`slowest_rank_layers`;
    #: :mod:`milp_partition.run.tp_timed`): ``f_v(b, t)``, ``g_v(b, t)``; at the sizes of the shapes with that ``t``.
    split_times: dict[int, dict[int, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    #: Degree ``t > 1`` -> (the split model's optimizer step on one rank, seconds; its parameter tensors; how many are
    #: DTensors), timed after each of those passes, each by its slowest rank, the median (:func:`split_optimizer_s`).
    split_optimizer: dict[int, tuple[float, int, int]] = field(default_factory=dict)
    #: ``(micro-batch size, kappa_F, kappa_B)`` of the one-rank shapes' sizes: the passes inside ``run``'s step over the
    #: layer timer's (:func:`milp_partition.run.inrun.time_layers_in_step`); empty without the model.
    in_step_factors: tuple[tuple[int, float, float], ...] = ()
    #: The one-rank group's optimizer step and ``zero_grad`` of the whole model inside ``run``'s step, seconds (the median
    #: over the rounds of every size, :attr:`milp_partition.run.inrun.InStepTimings.optimizer_s`), and the model's
    #: parameter tensors; 0 and 0 where no one-rank shape was calibrated with the model.
    optimizer_in_step_s: float = 0.0
    optimizer_param_tensors: int = 0


def empty_worker(
    rank: int,
    world: int,
    store_path: str,
    shapes: Sequence[tuple[int, int, int, int]],
    threads: int,
    repeats: int,
    out_dir: str,
    model: tuple[dict[str, Any], str, tuple[int, ...], int] | None = None,
    layer_repeats: int = 7,
    calibration_seconds: float = 0.0,
) -> None:
    """One rank of a group of ``world`` ranks: ``E`` of every shape ``(p, d, m, t)`` (``p d t = world``), gloo's fits when
    ``world > 1``, DTensor's overheads when a shape has ``t > 1``, and with ``model`` (the graph, its path, the sizes, the
    global batch) its layers timed at those sizes, in step, and under DDP at the sizes of the shapes with ``d > 1`` and
    ``t = 1`` (``layer_repeats`` passes at least, the sizes in turn, for at least ``calibration_seconds``: :mod:`.interleave`;
    the shapes' empty steps likewise, ``repeats`` of each at least); writes ``empty{rank}.json``. Each rank on cores of its own, as ``run`` pins its ranks (:mod:`.pinning`)."""
    set_parent_death_signal()
    pin_rank(rank, world, threads)
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(threads)
    device = torch.device("cpu")
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        links = asdict(measure_links(rank)) if world > 1 else {}
        links.pop("empty_step_s", None)
        timers: list[tuple[EmptyStep, EmptyStep | None]] = []
        for p, d, m, t in shapes:
            mesh = init_device_mesh("cpu", (p, d, t), mesh_dim_names=("pp", "dp", "tp"))
            pp = mesh["pp"].get_local_rank()
            dp_group = mesh["dp"].get_group() if d > 1 and t == 1 else None  # run: no DDP at t > 1
            e = EmptyStep(p, pp, m, device, mesh["pp"].get_group(), dp_group)
            # at t > 1 the same with TP_PAIRS column / row pairs on the tensor-parallel mesh: DTensor's cost per module
            paired = EmptyStep(p, pp, m, device, mesh["pp"].get_group(), None, mesh["tp"], TP_PAIRS) if t > 1 else None
            timers.append((e, paired))
        steps = [x for pair in timers for x in pair if x is not None]
        interleaved_rounds(steps, EmptyStep.one, repeats, calibration_seconds, largest_over_group)  # every shape in turn
        found: list[list[float]] = []
        for (p, d, m, t), (e, paired) in zip(shapes, timers, strict=True):
            found.append([p, d, m, e.median_s()] if paired is None else [p, d, m, e.median_s(), t, paired.median_s()])
        dtensor: dict[str, float] = {}
        if any(t > 1 for *_, t in shapes):  # DTensor's hooks on this rank's own one-rank mesh, as run measures them
            own_group = [dist.new_group([r]) for r in range(world)][rank]
            dtensor = asdict(calibrate_runtime(threads, group=own_group))
        busy: dict[str, dict[str, list[list[float]]]] = {}
        in_step: list[list[float]] = []
        optimizer_in_step: list[float] = [0.0, 0]
        ddp_totals: list[list[Any]] = []
        tp_saved: dict[str, Any] = {}
        tp_times: dict[str, Any] = {}
        tp_optimizer: dict[str, Any] = {}
        if model is not None:  # each layer's saved bytes on one rank of each t-rank mesh, as run counts them
            tp_saved = _saved_on_tp_meshes(model, shapes, world, threads)
            # and its passes split so, timed in step on every rank (f_v(b, t), g_v(b, t)), and its optimizer step
            tp_times, tp_optimizer = _timed_on_tp_meshes(model, shapes, world, threads, layer_repeats, calibration_seconds)
        if model is not None:
            sizes_of: dict[int, set[int]] = {}
            for _, d, m, t in shapes:
                if d > 1 and t == 1:  # run: DDP at t = 1 only
                    sizes_of.setdefault(d, set()).add(model[3] // (d * m))
            ddp = {}
            for d in sorted(sizes_of):  # every rank creates every group, in one order
                group = init_device_mesh("cpu", (world // d, d), mesh_dim_names=("pp", "dp"))["dp"].get_group()
                ddp[d] = (group, tuple(sorted(sizes_of[d])))
            if world == 1:  # one rank: the layers scaled to the passes inside run's own step (one "pass": the result)
                alone = time_layers_in_step(
                    model[0], model[1], model[2], model[3], threads, layer_repeats, min_seconds=calibration_seconds
                )
                busy = {str(b): {v: [[f], [g]] for v, (f, g) in t.items()} for b, t in alone.layers.items()}
                in_step = [[b, kf, kb] for b, (kf, kb) in sorted(alone.factors.items())]
                optimizer_in_step = [alone.optimizer_s, alone.param_tensors]
            else:
                got = time_layers_in_lockstep(
                    model[0], model[1], model[2], dist.barrier, threads, layer_repeats, ddp=ddp,
                    min_seconds=calibration_seconds, agree_max=largest_over_group,
                )  # fmt: skip
                busy = {str(b): {v: [f, g] for v, (f, g) in t.items()} for b, t in got.layers.items()}
                ddp_totals = [[d, b, [list(x) for x in pairs]] for (d, b), pairs in sorted(got.ddp_totals.items())]
        out: dict[str, Any] = {"steps": found, "links": links, "busy": busy, "ddp": ddp_totals, "dtensor": dtensor}
        out["tp_saved"], out["tp_times"], out["tp_optimizer"] = tp_saved, tp_times, tp_optimizer
        out["in_step"], out["optimizer_in_step"] = in_step, optimizer_in_step
        write_atomic(Path(out_dir) / f"empty{rank}.json", json.dumps(out))
    finally:
        dist.destroy_process_group()


def largest_over_group(x: float) -> float:
    """The largest of ``x`` over the default process group's ranks (a collective: every rank calls it once)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(x)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _saved_on_tp_meshes(
    model: tuple[dict[str, Any], str, tuple[int, ...], int], shapes: Sequence[tuple[int, int, int, int]], world: int, threads: int
) -> dict[str, Any]:
    """Per degree ``t > 1`` of ``shapes``: the model split over a ``t``-rank mesh (``world / t`` of them side by side) as
    ``run`` splits it, each node's saved bytes per sample on this rank at the sizes ``G / (d m)`` of those shapes
    (:func:`milp_partition.run.tp_saved.saved_at_degree`): ``{t: {"saved": {b: {node: x}}, "reused": {b: {node: {u: x}}}}}``
    (JSON keys).  Collective: every rank of the group calls it with the same shapes."""
    from torch.distributed.device_mesh import init_device_mesh

    sizes_of = _sizes_at_degree(model, shapes)
    out: dict[str, Any] = {}
    for t in sorted(sizes_of):
        mesh = init_device_mesh("cpu", (world // t, t), mesh_dim_names=("rest", "tp"))
        got = saved_at_degree(model[0], model[1], sorted(sizes_of[t]), t, mesh["tp"], threads)
        out[str(t)] = {
            "saved": {str(b): x for b, x in got.saved_bytes_per_sample.items()},
            "reused": {str(b): x for b, x in got.reused_bytes_per_sample.items()},
        }
    return out


def _sizes_at_degree(
    model: tuple[dict[str, Any], str, tuple[int, ...], int], shapes: Sequence[tuple[int, int, int, int]]
) -> dict[int, set[int]]:
    """Per degree ``t > 1`` of ``shapes`` (``(p, d, m, t)``): the micro-batch sizes ``G / (d m)`` of its shapes."""
    sizes_of: dict[int, set[int]] = {}
    for _, d, m, t in shapes:
        if t > 1:
            sizes_of.setdefault(t, set()).add(model[3] // (d * m))
    return sizes_of


def _timed_on_tp_meshes(
    model: tuple[dict[str, Any], str, tuple[int, ...], int],
    shapes: Sequence[tuple[int, int, int, int]],
    world: int,
    threads: int,
    repeats: int,
    min_seconds: float = 0.0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per degree ``t > 1`` of ``shapes`` (each for at least ``min_seconds``, its sizes in turn): the model split over a ``t``-rank mesh (``world / t`` of them side by side, every
    rank computing at once) as ``run`` splits it, its nodes' passes timed on this rank at the sizes of those shapes
    (:func:`milp_partition.run.tp_timed.time_split_layers_in_lockstep`): ``{t: {b: {node: [forward per pass, backward per
    pass]}}}``, and its optimizer's step after each pass, ``{t: {"seconds": {b: [per pass]}, "params": n, "dtensors":
    n_dt}}`` (JSON keys).  Collective: every rank of the group calls it with the same shapes."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    out: dict[str, Any] = {}
    opt: dict[str, Any] = {}
    for t, sizes in sorted(_sizes_at_degree(model, shapes).items()):
        mesh = init_device_mesh("cpu", (world // t, t), mesh_dim_names=("rest", "tp"))
        got = time_split_layers_in_lockstep(
            model[0], model[1], sorted(sizes), t, mesh["tp"], dist.barrier, threads, repeats,
            min_seconds=min_seconds, agree_max=largest_over_group,
        )  # fmt: skip
        out[str(t)] = {str(b): {v: [f, g] for v, (f, g) in by.items()} for b, by in got.layers.items()}
        seconds = {str(b): x for b, x in got.optimizer_s.items()}
        opt[str(t)] = {"seconds": seconds, "params": got.param_tensors, "dtensors": got.dtensor_params}
    return out, opt


def split_optimizer_s(ranks: Sequence[Mapping[str, Any]], t: str) -> float:
    """The split model's optimizer step at degree ``t`` (a JSON key) from the ranks' ``tp_optimizer`` records: per size
    and pass the slowest rank's (a step waits for it), the median over every size's passes."""
    sizes = ranks[0]["tp_optimizer"][t]["seconds"]
    per_pass = [max(float(r["tp_optimizer"][t]["seconds"][b][k]) for r in ranks) for b in sizes for k in range(len(sizes[b]))]
    return statistics.median(per_pass) if per_pass else 0.0


def largest_over_ranks(
    ranks: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, dict[int, dict[str, float]]], dict[int, dict[int, dict[str, dict[str, float]]]]]:
    """The ranks' ``tp_saved`` records (:func:`_saved_on_tp_meshes`) as one: per degree, size and node the largest over
    the ranks (each rank's planned memory must hold what any rank of its mesh saves): saved bytes per sample, and the
    bytes a node saves again of an earlier node's."""
    saved: dict[int, dict[int, dict[str, float]]] = {}
    reused: dict[int, dict[int, dict[str, dict[str, float]]]] = {}
    for r in ranks:
        for t, got in (r.get("tp_saved") or {}).items():
            for b, by_node in got["saved"].items():
                into = saved.setdefault(int(t), {}).setdefault(int(b), {})
                for v, x in by_node.items():
                    into[v] = max(into.get(v, 0.0), float(x))
            for b, by_node in got["reused"].items():
                again = reused.setdefault(int(t), {}).setdefault(int(b), {})
                for v, by in by_node.items():
                    for u, x in by.items():
                        again.setdefault(v, {})[u] = max(again.get(v, {}).get(u, 0.0), float(x))
    return saved, reused


def slowest_rank_layers(ranks: Sequence[Mapping[str, Sequence[Sequence[float]]]]) -> dict[str, tuple[float, float]]:
    """Per node (forward, backward) seconds of the slowest rank: ``ranks[r][node] = [forward per pass, backward per
    pass]`` of passes run in step (:func:`milp_partition.run.predict.time_layers_in_lockstep`).  In each pass the rank
    whose layers took longest in all (forward plus backward) stands for it, as a step waits for its slowest rank (run.json
    measures each step on the slowest); each node takes the median over the passes of that rank's time.

    Raises
    ------
    ValueError
        When the ranks timed different nodes or different numbers of passes.
    """
    nodes = list(ranks[0])
    passes = len(ranks[0][nodes[0]][0]) if nodes else 0
    for r in ranks:
        if list(r) != nodes or any(len(r[v][0]) != passes or len(r[v][1]) != passes for v in nodes):
            raise ValueError("the ranks timed different nodes or numbers of passes")
    if not nodes or passes == 0:
        return {v: (0.0, 0.0) for v in nodes}
    totals = [[math.fsum(r[v][0][k] + r[v][1][k] for v in nodes) for k in range(passes)] for r in ranks]
    slowest = [max(range(len(ranks)), key=[t[k] for t in totals].__getitem__) for k in range(passes)]
    return {
        v: (
            statistics.median(float(ranks[slowest[k]][v][0][k]) for k in range(passes)),
            statistics.median(float(ranks[slowest[k]][v][1][k]) for k in range(passes)),
        )
        for v in nodes
    }


def ddp_added_s(ranks: Sequence[Sequence[Sequence[float]]]) -> float:
    """What DDP added to a pass: ``ranks[r][k] = (plain seconds, seconds under DDP)`` of pass ``k`` on rank ``r``; per pass
    the slowest rank's under DDP less the slowest rank's plain (a step waits for its slowest rank), the median over the
    passes, never below 0.

    Raises
    ------
    ValueError
        When the ranks timed different numbers of passes, or none.
    """
    passes = len(ranks[0]) if ranks else 0
    if passes == 0 or any(len(r) != passes for r in ranks):
        raise ValueError("the ranks timed different numbers of DDP passes, or none")
    added = [max(r[k][1] for r in ranks) - max(r[k][0] for r in ranks) for k in range(passes)]
    return max(statistics.median(added), 0.0)


def calibrate_empty_steps(
    shapes: Sequence[tuple[int, ...]],
    threads: int = 1,
    repeats: int = 11,
    progress: Callable[[str], None] | None = None,
    model: tuple[dict[str, Any], str, int] | None = None,
    layer_repeats: int = 7,
    calibration_seconds: float = 0.0,
) -> EmptySteps:
    """``E`` of every ``(stages, data-parallel, micro-batches per replica)`` or ``(..., tensor-parallel t)`` in ``shapes``
    on CPU ranks (see the module docstring); one launch of ``p d t`` ranks per rank count.  ``model``: the imported graph, its path and the global
    batch ``G``: every group of two ranks or more also times its layers at its shapes' sizes ``G / (d m)`` (medians of
    ``layer_repeats``), and the group of one rank times them inside ``run``'s step (:mod:`milp_partition.run.inrun`,
    ``layer_repeats`` rounds); either for at least ``calibration_seconds``, the sizes in turn round by round
    (:mod:`milp_partition.run.interleave`).  ``repeats``: the empty steps per shape whose median is ``E`` (more than the run's 5: one
    calibration prices every plan, so a load spike in it would move every plan of its shape)."""
    say = progress or (lambda _: None)
    by_world: dict[int, list[tuple[int, int, int, int]]] = {}
    for p, d, m, t in sorted({(*x[:3], x[3] if len(x) > 3 else 1) for x in shapes}):
        if p < 1 or d < 1 or t < 1 or m < p:
            raise ValueError(f"no 1F1B step for {p} stages x d = {d} x t = {t} with {m} micro-batches per replica")
        if not ddp_pipeline_runs(p, d, m, t):  # torch's DDP inside Schedule1F1B asserts there
            raise ValueError(f"DDP in 1F1B does not run {p} stages x d = {d} with {m} micro-batches per replica")
        by_world.setdefault(p * d * t, []).append((p, d, m, t))
    steps: list[tuple[int, int, int, float]] = []
    tensor_steps: list[tuple[int, int, int, int, float]] = []
    dtensor: dict[str, float] = {}
    per_pair: list[float] = []
    links: dict[str, float] = {}
    busy: dict[int, dict[int, dict[str, tuple[float, float]]]] = {}
    ddp_in_step: list[tuple[int, int, float]] = []
    in_step: list[tuple[int, float, float]] = []
    optimizer_in_step = (0.0, 0)
    saved_tp: dict[int, dict[int, dict[str, float]]] = {}
    reused_tp: dict[int, dict[int, dict[str, dict[str, float]]]] = {}
    split_times: dict[int, dict[int, dict[str, tuple[float, float]]]] = {}
    split_optimizer: dict[int, tuple[float, int, int]] = {}
    for world, mine in sorted(by_world.items()):
        say(f"the empty step of {len(mine)} shape(s) on {world} rank(s)")
        job = None
        if model is not None:
            job = (model[0], model[1], tuple(sorted({model[2] // (d * m) for _, d, m, _ in mine})), model[2])
        with tempfile.TemporaryDirectory(prefix="milp-empty-") as tmp:
            call = (world, str(Path(tmp) / "store"), mine, threads, repeats, tmp, job, layer_repeats, calibration_seconds)
            run_ranks(empty_worker, world, call, tmp)
            ranks = [json.loads((Path(tmp) / f"empty{r}.json").read_text()) for r in range(world)]
        if job is not None:
            busy[world] = {int(b): slowest_rank_layers([r["busy"][b] for r in ranks]) for b in ranks[0]["busy"]}
            at_t, again_t = largest_over_ranks(ranks)
            for t, saved_by_size in at_t.items():
                saved_tp.setdefault(t, {}).update(saved_by_size)
            for t, reused_by_size in again_t.items():
                reused_tp.setdefault(t, {}).update(reused_by_size)
            for t, by_size in (ranks[0].get("tp_times") or {}).items():  # each pass by its slowest rank
                for b in by_size:
                    timed = slowest_rank_layers([r["tp_times"][t][b] for r in ranks])
                    split_times.setdefault(int(t), {})[int(b)] = timed
            for t, got in (ranks[0].get("tp_optimizer") or {}).items():
                split_optimizer[int(t)] = (split_optimizer_s(ranks, t), int(got["params"]), int(got["dtensors"]))
            in_step += [(int(b), float(kf), float(kb)) for b, kf, kb in ranks[0].get("in_step") or ()]
            seconds, tensors = ranks[0].get("optimizer_in_step") or (0.0, 0)
            if world == 1 and seconds > 0:
                optimizer_in_step = (float(seconds), int(tensors))
            for k, (d, b, _) in enumerate(ranks[0]["ddp"]):
                ddp_in_step.append((int(d), int(b), ddp_added_s([r["ddp"][k][2] for r in ranks])))
        for k, (p, d, m, t) in enumerate(mine):
            e = statistics.fmean(float(r["steps"][k][3]) for r in ranks)
            if t == 1:
                steps.append((p, d, m, e))
            else:
                tensor_steps.append((p, d, t, m, e))
                paired = statistics.fmean(float(r["steps"][k][5]) for r in ranks)
                per_pair.append(max(paired - e, 0.0) / (TP_PAIRS * (m + p - 1)))  # each micro-batch crosses the pairs
        if ranks[0].get("dtensor"):
            dtensor = {key: statistics.fmean(float(r["dtensor"][key]) for r in ranks) for key in ranks[0]["dtensor"]}
        if ranks[0]["links"]:
            links = {key: statistics.fmean(float(r["links"][key]) for r in ranks) for key in ranks[0]["links"]}
    if per_pair:  # o_dt per module on the t-rank mesh, each pair's two all-reduces' latency in it
        dtensor.update(dtensor_module_s=statistics.median(per_pair) / 2.0, latency_in_module=1.0)
    return EmptySteps(
        tuple(steps),
        links,
        threads,
        busy,
        tensor_steps=tuple(tensor_steps),
        dtensor=dtensor,
        ddp_in_step=tuple(ddp_in_step),
        saved_at_degree=saved_tp,
        reused_at_degree=reused_tp,
        split_times=split_times,
        split_optimizer=split_optimizer,
        in_step_factors=tuple(in_step),
        optimizer_in_step_s=optimizer_in_step[0],
        optimizer_param_tensors=optimizer_in_step[1],
    )
