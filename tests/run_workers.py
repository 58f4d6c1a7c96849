"""Stand-in worker functions for :func:`milp_partition.run.launch.run_ranks` tests (a light module: spawned
children import it)."""

from __future__ import annotations

import time


def fail_or_wait(rank: int, seconds: float) -> None:
    """A worker: rank 1 fails at once, the others wait (as a rank blocked in a collective would)."""
    if rank == 1:
        raise ValueError("a broken stage")
    time.sleep(seconds)


def write_env(rank: int, name: str, out_dir: str) -> None:
    """A worker: writes the value of the environment variable ``name`` it sees to ``env{rank}.txt``."""
    import os
    from pathlib import Path

    Path(out_dir, f"env{rank}.txt").write_text(os.environ.get(name, ""))


def tp_saved_and_held(rank: int, world: int, store_path: str, graph_path: str, global_batch: int, out_dir: str) -> None:
    """A worker of tests/test_tp_memory.py: on a ``world``-rank tensor-parallel mesh, the layers' saved bytes as the
    calibration counts them (run/tp_saved.py), then two steps of the whole model split as run splits it (one stage, one
    micro-batch of the global batch, torch's Schedule1F1B, each step its own batch) and what the rank held as run.json
    counts it (weights, gradients, optimizer state, saved activations' peak); writes ``tp{rank}.json``."""
    import json
    from pathlib import Path

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from milp_partition.run.engine import SavedActivations, apply_tensor_parallel, tensor_bytes_of, tp_roles
    from milp_partition.run.model import batch, build_model, loss_fn, optimizer
    from milp_partition.run.predict import layer_spec
    from milp_partition.run.tp_saved import saved_at_degree

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        data = json.loads(Path(graph_path).read_text())
        mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("pp", "tp"))
        got = saved_at_degree(data, graph_path, [global_batch], world, mesh["tp"])
        spec = layer_spec(data, graph_path, [global_batch])
        model = build_model(spec, 0)
        batches = [batch(spec, model, step, 0) for step in range(2)]  # before the split, as run makes them
        apply_tensor_parallel(model, tp_roles(spec, spec.node_order, world), mesh["tp"], world)
        params = list(model.parameters())
        opt = optimizer(spec, params)
        stage = PipelineStage(model, 0, 1, torch.device("cpu"), group=mesh["pp"].get_group())
        schedule = Schedule1F1B(stage, 1, loss_fn=loss_fn, scale_grads=True)
        counter = SavedActivations({(p.to_local() if hasattr(p, "to_local") else p).untyped_storage().data_ptr() for p in params})
        for args, kwargs, target in batches:
            with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
                schedule.step(*args, target=target, losses=[], **kwargs)
            opt.step()
            held = tensor_bytes_of(params, opt)
            opt.zero_grad(set_to_none=True)
        out = {"saved": got.saved_bytes_per_sample, "reused": got.reused_bytes_per_sample, "held": [*held, counter.peak]}
        Path(out_dir, f"tp{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()
