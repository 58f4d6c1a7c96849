"""Set-ups the run-side timing tests share: the bundled small MLP imported by layers, and a one-rank gloo group."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def small_mlp_graph(tmp_path: Path, batch: int = 4) -> tuple[Path, dict[str, Any]]:
    """``milp_partition.importers.models:mlp_small_test`` imported with layer granularity for training at ``batch x 32``
    into ``tmp_path/mlp.json``: its path and its parsed JSON."""
    from milp_partition.cli.dispatch import main

    graph = tmp_path / "mlp.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", f"{batch}x32", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    return graph, json.loads(graph.read_text())


@contextmanager
def one_rank_group(tmp_path: Path) -> Iterator[None]:
    """A default gloo process group of one rank (a file store in ``tmp_path``), destroyed on leaving."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
