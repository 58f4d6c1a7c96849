"""Workers of tests/test_tp_timed.py (module-level, so that the launcher's ranks can import them)."""

from __future__ import annotations


def split_times_on_mesh(rank: int, world: int, store_path: str, graph_path: str, size: int, repeats: int, out_dir: str) -> None:
    """On a ``world``-rank tensor-parallel mesh: the model's layers split as run splits it, timed in step at micro-batch
    size ``size`` (run/tp_timed.py); writes ``timed{rank}.json`` (size -> node -> [forward per pass, backward per pass])."""
    import json
    from pathlib import Path

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from milp_partition.run.tp_timed import time_split_layers_in_lockstep

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        data = json.loads(Path(graph_path).read_text())
        mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("rest", "tp"))
        got = time_split_layers_in_lockstep(data, graph_path, [size], world, mesh["tp"], dist.barrier, 1, repeats)
        out = {str(b): {v: [f, g] for v, (f, g) in by.items()} for b, by in got.layers.items()}
        out["optimizer"] = {"seconds": got.optimizer_s, "params": got.param_tensors, "dtensors": got.dtensor_params}
        Path(out_dir, f"timed{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


def split_times_over_seconds(
    rank: int, world: int, store_path: str, graph_path: str, sizes: list[int], repeats: int, seconds: float, out_dir: str
) -> None:
    """As :func:`split_times_on_mesh` at every size of ``sizes`` in turn for at least ``seconds`` (the round count agreed
    over the ranks by run/empty.largest_over_group); writes ``over{rank}.json`` (size -> passes timed)."""
    import json
    from pathlib import Path

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from milp_partition.run.empty import largest_over_group
    from milp_partition.run.tp_timed import time_split_layers_in_lockstep

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        data = json.loads(Path(graph_path).read_text())
        mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("rest", "tp"))
        got = time_split_layers_in_lockstep(
            data, graph_path, sizes, world, mesh["tp"], dist.barrier, 1, repeats, min_seconds=seconds,
            agree_max=largest_over_group,
        )  # fmt: skip
        passes = {
            str(b): sorted({len(f) for f, _ in by.values()} | {len(g) for _, g in by.values()}) for b, by in got.layers.items()
        }
        Path(out_dir, f"over{rank}.json").write_text(json.dumps(passes))
    finally:
        dist.destroy_process_group()
