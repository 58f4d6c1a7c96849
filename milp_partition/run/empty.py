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
from milp_partition.run.engine import set_parent_death_signal
from milp_partition.run.launch import run_ranks
from milp_partition.run.predict import empty_step, measure_links, time_layers_in_lockstep


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
        pass's slowest rank, :func:`slowest_rank_layers`); empty without the model or with one rank only.
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
    ddp_in_step: tuple[tuple[int, int, float], ...] = ()


def empty_worker(
    rank: int,
    world: int,
    store_path: str,
    shapes: Sequence[tuple[int, int, int]],
    threads: int,
    repeats: int,
    out_dir: str,
    model: tuple[dict[str, Any], str, tuple[int, ...], int] | None = None,
    layer_repeats: int = 7,
) -> None:
    """One rank of a group of ``world`` ranks: ``E`` of every shape (``p d = world``), gloo's fits when ``world > 1``, and
    with ``model`` (the graph, its path, the sizes, the global batch) its layers timed at those sizes, in step, and
    under DDP at the sizes of the shapes with ``d > 1``; writes ``empty{rank}.json``."""
    set_parent_death_signal()
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(threads)
    device = torch.device("cpu")
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        links = asdict(measure_links(rank)) if world > 1 else {}
        links.pop("empty_step_s", None)
        found = []
        for p, d, m in shapes:
            mesh = init_device_mesh("cpu", (p, d, 1), mesh_dim_names=("pp", "dp", "tp"))
            pp = mesh["pp"].get_local_rank()
            dp_group = mesh["dp"].get_group() if d > 1 else None
            e = empty_step(p, pp, m, device, mesh["pp"].get_group(), dp_group, repeats=repeats)
            found.append([p, d, m, e])
        busy: dict[str, dict[str, list[list[float]]]] = {}
        ddp_totals: list[list[Any]] = []
        if model is not None:
            sizes_of: dict[int, set[int]] = {}
            for _, d, m in shapes:
                if d > 1:
                    sizes_of.setdefault(d, set()).add(model[3] // (d * m))
            ddp = {}
            for d in sorted(sizes_of):  # every rank creates every group, in one order
                group = init_device_mesh("cpu", (world // d, d), mesh_dim_names=("pp", "dp"))["dp"].get_group()
                ddp[d] = (group, tuple(sorted(sizes_of[d])))
            got = time_layers_in_lockstep(model[0], model[1], model[2], dist.barrier, threads, layer_repeats, ddp=ddp)
            busy = {str(b): {v: [f, g] for v, (f, g) in t.items()} for b, t in got.layers.items()}
            ddp_totals = [[d, b, [list(x) for x in pairs]] for (d, b), pairs in sorted(got.ddp_totals.items())]
        out = {"steps": found, "links": links, "busy": busy, "ddp": ddp_totals}
        write_atomic(Path(out_dir) / f"empty{rank}.json", json.dumps(out))
    finally:
        dist.destroy_process_group()


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
    shapes: Sequence[tuple[int, int, int]],
    threads: int = 1,
    repeats: int = 11,
    progress: Callable[[str], None] | None = None,
    model: tuple[dict[str, Any], str, int] | None = None,
    layer_repeats: int = 7,
) -> EmptySteps:
    """``E`` of every ``(stages, data-parallel, micro-batches per replica)`` in ``shapes`` on CPU ranks (see the module
    docstring); one launch of ``p d`` ranks per rank count.  ``model``: the imported graph, its path and the global
    batch ``G``: every group of two ranks or more also times its layers at its shapes' sizes ``G / (d m)`` (medians of
    ``layer_repeats``).  ``repeats``: the empty steps per shape whose median is ``E`` (more than the run's 5: one
    calibration prices every plan, so a load spike in it would move every plan of its shape)."""
    say = progress or (lambda _: None)
    by_world: dict[int, list[tuple[int, int, int]]] = {}
    for p, d, m in sorted(set(shapes)):
        if p < 1 or d < 1 or m < p:
            raise ValueError(f"no 1F1B step for {p} stages x d = {d} with {m} micro-batches per replica")
        by_world.setdefault(p * d, []).append((p, d, m))
    steps: list[tuple[int, int, int, float]] = []
    links: dict[str, float] = {}
    busy: dict[int, dict[int, dict[str, tuple[float, float]]]] = {}
    ddp_in_step: list[tuple[int, int, float]] = []
    for world, mine in sorted(by_world.items()):
        say(f"the empty step of {len(mine)} shape(s) on {world} rank(s)")
        job = None
        if model is not None and world > 1:
            job = (model[0], model[1], tuple(sorted({model[2] // (d * m) for _, d, m in mine})), model[2])
        with tempfile.TemporaryDirectory(prefix="milp-empty-") as tmp:
            call = (world, str(Path(tmp) / "store"), mine, threads, repeats, tmp, job, layer_repeats)
            run_ranks(empty_worker, world, call, tmp)
            ranks = [json.loads((Path(tmp) / f"empty{r}.json").read_text()) for r in range(world)]
        if job is not None:
            busy[world] = {int(b): slowest_rank_layers([r["busy"][b] for r in ranks]) for b in ranks[0]["busy"]}
            for k, (d, b, _) in enumerate(ranks[0]["ddp"]):
                ddp_in_step.append((int(d), int(b), ddp_added_s([r["ddp"][k][2] for r in ranks])))
        for k, (p, d, m) in enumerate(mine):
            steps.append((p, d, m, statistics.fmean(float(r["steps"][k][3]) for r in ranks)))
        if ranks[0]["links"]:
            links = {key: statistics.fmean(float(r["links"][key]) for r in ranks) for key in ranks[0]["links"]}
    return EmptySteps(tuple(steps), links, threads, busy, tuple(ddp_in_step))
