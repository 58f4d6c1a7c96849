"""Fit gloo's all-reduce and point-to-point on this machine (2 processes), for a CPU profile.

``calibrate --backend numpy`` measures, with ``torch.distributed`` on gloo over a file store,
the median time of an all-reduce of float32 tensors of several sizes between two processes and of
a one-way send (half a ping-pong), and fits

* ``allreduce``: ``time_s = 2 (p-1) alpha_s + 2 (p-1)/p * bytes * beta_s_per_byte`` (p = 2), the profile's ring model;
* ``links["d2d"]``: ``time_s = alpha_s + bytes * beta_s_per_byte`` (a stage boundary's transfer, and the
  bandwidth the joint planner uses by default).

Needs torch (imported inside the functions); without it the profile keeps its copy-based links.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from milp_partition.calibration.profile import AlphaBeta, DeviceProfile
from milp_partition.io.atomic import write_atomic

#: Message sizes in bytes (float32 tensors).
SIZES: tuple[int, ...] = (4 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024, 16 * 1024 * 1024)
PARTICIPANTS = 2


def _worker(rank: int, store_path: str, sizes: tuple[int, ...], repeats: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, PARTICIPANTS), rank=rank, world_size=PARTICIPANTS)
    try:
        rows: dict[str, list[list[float]]] = {"allreduce": [], "p2p": []}
        for size in sizes:
            x = torch.ones(size // 4, dtype=torch.float32)
            for name in ("allreduce", "p2p"):
                times = []
                for _ in range(repeats + 1):  # the first is a warm-up
                    dist.barrier()
                    t0 = time.perf_counter()
                    if name == "allreduce":
                        dist.all_reduce(x)
                    elif rank == 0:
                        dist.send(x, 1)
                        dist.recv(x, 1)
                    else:
                        dist.recv(x, 0)
                        dist.send(x, 0)
                    times.append(time.perf_counter() - t0)
                seconds = statistics.median(times[1:])
                rows[name].append([float(size), seconds / 2 if name == "p2p" else seconds])
        if rank == 0:
            write_atomic(out, json.dumps(rows), what="the measurement")
    finally:
        dist.destroy_process_group()


def measure_gloo(sizes: tuple[int, ...] = SIZES, repeats: int = 7) -> dict[str, list[list[float]]]:
    """``{"allreduce": [[bytes, s], ...], "p2p": [...]}``: medians over ``repeats`` on 2 gloo processes."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="milp-gloo-") as tmp:
        out = os.path.join(tmp, "out.json")
        mp.start_processes(
            _worker, args=(os.path.join(tmp, "store"), sizes, repeats, out), nprocs=PARTICIPANTS, join=True, start_method="spawn"
        )
        data: dict[str, list[list[float]]] = json.loads(Path(out).read_text())
    return data


def _line(points: list[list[float]], scale: float) -> tuple[float, float]:
    x = np.array([p[0] * scale for p in points])
    t = np.array([p[1] for p in points])
    beta, alpha = np.polyfit(x, t, 1)
    return max(float(alpha), 0.0), max(float(beta), 1e-15)


def apply_gloo(profile: DeviceProfile, rows: dict[str, Any]) -> DeviceProfile:
    """The profile with gloo's fitted all-reduce and point-to-point link (``d2d``)."""
    p = PARTICIPANTS
    intercept, beta = _line(rows["allreduce"], 2 * (p - 1) / p)
    allreduce = AlphaBeta(intercept / (2 * (p - 1)), beta, f"gloo ring all-reduce over {p} processes on this CPU (measured)")
    a2, b2 = _line(rows["p2p"], 1.0)
    links = dict(profile.links)
    links["d2d"] = AlphaBeta(a2, b2, "gloo send/recv between 2 processes on this CPU (measured, half a ping-pong)")
    return replace(
        profile,
        allreduce=allreduce,
        links=links,
        # the suite's "allreduce: not measured" no longer holds: gloo measured it
        notes=(
            *(n for n in profile.notes if not n.startswith("allreduce: not measured")),
            "all-reduce and d2d: gloo between 2 processes (milp_partition.calibration.gloo)",
        ),
    )
