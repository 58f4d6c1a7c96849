"""Start one process per device (``torch.multiprocessing``, spawn), collect their results, run the reference."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from milp_partition.run.engine import reference, summarise, uses_cuda, worker
from milp_partition.run.predict import combine, predict_step
from milp_partition.run.spec import RunSpec


def run_plan(spec: RunSpec, steps: int, *, seed: int = 0, threads: int = 1, warmup: int = 1) -> dict[str, Any]:
    """Run ``spec`` for ``steps`` steps on ``spec.world_size`` processes, then in one process; run.json's dict.

    The predicted step (:func:`milp_partition.run.predict.predict_step`) is computed from what the workers
    measured before the plan's steps (all ranks at once): the whole model's layers at one sample, torch's
    overheads on tiny modules, gloo's latency and bandwidth in their group.

    The rendezvous is a :class:`torch.distributed.FileStore` in a fresh temporary directory (no port to pick);
    each worker asks for SIGTERM when this process dies, and a failed worker stops the others
    (``torch.multiprocessing.start_processes`` raises and terminates them).
    """
    import torch
    import torch.multiprocessing as mp

    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    world = spec.world_size
    cuda = uses_cuda(world)
    with tempfile.TemporaryDirectory(prefix="milp-run-") as tmp:
        store = os.path.join(tmp, "store")
        mp.start_processes(
            worker, args=(world, store, spec, steps, seed, threads, tmp, cuda), nprocs=world, join=True, start_method="spawn"
        )
        ranks = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = reference(spec, steps, seed, device="cuda:0" if cuda else None)  # where rank 0 ran
    finally:
        torch.set_num_threads(previous)
    layers, costs, links = combine(ranks)
    prediction = predict_step(spec, layers, costs, links).to_dict()
    prediction["layers"] = layers.to_dict()
    out = summarise(spec, ranks, ref, warmup, prediction)
    if not spec.uniform:
        out["notes"].append(
            "the predicted step (run/predict.py) prices every stage at the first stage's data- and tensor-parallel "
            "degrees: for stages with different degrees it is approximate"
        )
    if torch.cuda.is_available() and not cuda:
        gpus = torch.cuda.device_count()
        out["notes"].append(
            f"{world} ranks and {gpus} GPU{'s' * (gpus != 1)}: ran on the CPU with gloo (nccl takes one rank per GPU)"
        )
    out.update({"seed": seed, "threads_per_rank": threads, "torch": torch.__version__})
    return out
