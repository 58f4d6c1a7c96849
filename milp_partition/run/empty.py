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
that group's shapes, all ranks at once (:func:`milp_partition.run.predict.time_layers_by_size`, a barrier before each
size): a plan of ``p d`` ranks shares the machine's cores and memory bandwidth among them, and its layers run at the
speed they have then, not alone (the run's own prediction times them so, inside the run).

A tensor-parallel shape ``(p, d, m, t)`` (``t > 1``) runs on ``p d t`` ranks over a ``(p, d, t)`` mesh, without DDP (as
``run`` runs it: DDP takes no DTensor) and with nothing split (DTensor's hooks and the activation all-reduces are priced
per split module); the same shape is measured again with :data:`TP_PAIRS` column / row pairs of tiny linear modules
on the tensor-parallel mesh (as ``run`` measures its own ``E`` with the stage's pairs): the difference over the pairs
and the micro-batches is ``o_dt`` of :mod:`milp_partition.costmodel.tensor` (DTensor's cost per split module, each
pair's forward and backward all-reduce latency in it; the median over the shapes).  DTensor's optimizer overhead per
parameter is measured on each rank's one-rank mesh (:func:`milp_partition.run.predict.calibrate_runtime`, as ``run``
does before its steps).

Torch is imported inside the functions.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from milp_partition.io.atomic import write_atomic
from milp_partition.run.engine import set_parent_death_signal
from milp_partition.run.launch import run_ranks
from milp_partition.run.predict import calibrate_runtime, empty_step, measure_links, time_layers_by_size

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
        Ranks -> micro-batch size -> node -> (forward, backward) seconds, timed with that many ranks at once (the
        mean over the ranks); empty without the model or with one rank only.
    """

    steps: tuple[tuple[int, int, int, float], ...]
    links: dict[str, float]
    threads: int = 1
    busy: dict[int, dict[int, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    #: ``(stages, data-parallel, tensor-parallel t > 1, micro-batches per replica, E seconds)`` per tensor-parallel shape.
    tensor_steps: tuple[tuple[int, int, int, int, float], ...] = ()
    #: DTensor's overheads (:class:`milp_partition.run.predict.TorchCosts`' fields), measured where a shape has ``t > 1``.
    dtensor: dict[str, float] = field(default_factory=dict)


def empty_worker(
    rank: int,
    world: int,
    store_path: str,
    shapes: Sequence[tuple[int, int, int, int]],
    threads: int,
    repeats: int,
    out_dir: str,
    model: tuple[dict[str, Any], str, tuple[int, ...]] | None = None,
    layer_repeats: int = 5,
) -> None:
    """One rank of a group of ``world`` ranks: ``E`` of every shape ``(p, d, m, t)`` (``p d t = world``), gloo's fits when
    ``world > 1``, DTensor's overheads when a shape has ``t > 1``, and with ``model`` (the graph, its path, the sizes) its
    layers timed at those sizes; writes ``empty{rank}.json``."""
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
        for p, d, m, t in shapes:
            mesh = init_device_mesh("cpu", (p, d, t), mesh_dim_names=("pp", "dp", "tp"))
            pp = mesh["pp"].get_local_rank()
            dp_group = mesh["dp"].get_group() if d > 1 and t == 1 else None  # run: no DDP at t > 1
            e = empty_step(p, pp, m, device, mesh["pp"].get_group(), dp_group, repeats=repeats)
            if t == 1:
                found.append([p, d, m, e])
                continue
            # the same with TP_PAIRS column / row pairs on the tensor-parallel mesh: DTensor's cost per module
            paired = empty_step(p, pp, m, device, mesh["pp"].get_group(), None, mesh["tp"], TP_PAIRS, repeats=repeats)
            found.append([p, d, m, e, t, paired])
        dtensor: dict[str, float] = {}
        if any(t > 1 for *_, t in shapes):  # DTensor's hooks on this rank's own one-rank mesh, as run measures them
            own_group = [dist.new_group([r]) for r in range(world)][rank]
            dtensor = asdict(calibrate_runtime(threads, group=own_group))
        busy: dict[str, dict[str, list[float]]] = {}
        if model is not None:
            got = time_layers_by_size(model[0], model[1], model[2], threads, layer_repeats, before_size=dist.barrier)
            busy = {str(b): {v: list(ft) for v, ft in t.items()} for b, t in got.times.items()}
        out = {"steps": found, "links": links, "busy": busy, "dtensor": dtensor}
        write_atomic(Path(out_dir) / f"empty{rank}.json", json.dumps(out))
    finally:
        dist.destroy_process_group()


def calibrate_empty_steps(
    shapes: Sequence[tuple[int, ...]],
    threads: int = 1,
    repeats: int = 11,
    progress: Callable[[str], None] | None = None,
    model: tuple[dict[str, Any], str, int] | None = None,
    layer_repeats: int = 5,
) -> EmptySteps:
    """``E`` of every ``(stages, data-parallel, micro-batches per replica)`` or ``(..., tensor-parallel t)`` in ``shapes``
    on CPU ranks (see the module docstring); one launch of ``p d t`` ranks per rank count.  ``model``: the imported graph, its path and the global
    batch ``G``: every group of two ranks or more also times its layers at its shapes' sizes ``G / (d m)`` (medians of
    ``layer_repeats``).  ``repeats``: the empty steps per shape whose median is ``E`` (more than the run's 5: one
    calibration prices every plan, so a load spike in it would move every plan of its shape)."""
    say = progress or (lambda _: None)
    by_world: dict[int, list[tuple[int, int, int, int]]] = {}
    for p, d, m, t in sorted({(*x[:3], x[3] if len(x) > 3 else 1) for x in shapes}):
        if p < 1 or d < 1 or t < 1 or m < p:
            raise ValueError(f"no 1F1B step for {p} stages x d = {d} x t = {t} with {m} micro-batches per replica")
        by_world.setdefault(p * d * t, []).append((p, d, m, t))
    steps: list[tuple[int, int, int, float]] = []
    tensor_steps: list[tuple[int, int, int, int, float]] = []
    dtensor: dict[str, float] = {}
    per_pair: list[float] = []
    links: dict[str, float] = {}
    busy: dict[int, dict[int, dict[str, tuple[float, float]]]] = {}
    for world, mine in sorted(by_world.items()):
        say(f"the empty step of {len(mine)} shape(s) on {world} rank(s)")
        job = None
        if model is not None and world > 1:
            job = (model[0], model[1], tuple(sorted({model[2] // (d * m) for _, d, m, _ in mine})))
        with tempfile.TemporaryDirectory(prefix="milp-empty-") as tmp:
            call = (world, str(Path(tmp) / "store"), mine, threads, repeats, tmp, job, layer_repeats)
            run_ranks(empty_worker, world, call, tmp)
            ranks = [json.loads((Path(tmp) / f"empty{r}.json").read_text()) for r in range(world)]
        if job is not None:
            busy[world] = {
                int(b): {
                    v: (
                        statistics.fmean(float(r["busy"][b][v][0]) for r in ranks),
                        statistics.fmean(float(r["busy"][b][v][1]) for r in ranks),
                    )
                    for v in t
                }
                for b, t in ranks[0]["busy"].items()
            }
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
    if per_pair:  # o_dt per module on the t-rank mesh, each pair's two all-reduces' latency in it
        dtensor.update(dtensor_module_s=statistics.median(per_pair) / 2.0, latency_in_module=1.0)
        if ranks[0]["links"]:
            links = {key: statistics.fmean(float(r["links"][key]) for r in ranks) for key in ranks[0]["links"]}
    return EmptySteps(tuple(steps), links, threads, busy, tuple(tensor_steps), dtensor)
