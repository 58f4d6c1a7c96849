"""Your own PyTorch model -> a proven joint plan (pipeline stages, data and tensor parallelism, recomputation).

A GPT with 8 blocks of width 1024 (16 heads, 512-token sequences, bf16 weights with fp32 Adam state) is captured on
PyTorch's meta device (shapes only: no weights, no GPU), costed with the H100 datasheet, and planned on 8 H100s
with 1 GiB each (a small budget, so that memory decides the cut).  Needs the ``torch`` extra.  Run from the
repository root: ``python examples/import_torch.py`` (10-20 s, most of it the import).  The CLI's two commands
(``milp-partition import torch ...`` then ``solve --problem joint``) are in docs/import.md.
"""

import json
import tempfile
from pathlib import Path

import torch

from milp_partition import (
    ImportSettings,
    LayerPlanSettings,
    import_torch_model,
    joint_from_imported,
    parse_bytes,
    solve_joint,
    write_imported,
)
from milp_partition.importers.models import GPT  # any torch.nn.Module will do: this one is a nanoGPT-style decoder

with torch.device("meta"):
    model = GPT(vocab=50304, d_model=1024, layers=8, heads=16, max_len=512)
tokens = torch.zeros(1, 512, dtype=torch.int64, device="meta")  # one sample: a sequence of 512 token ids

settings = ImportSettings(
    granularity="layer", training=True, dtype="bfloat16", optimizer_state_bytes_per_param_byte=7, profile="H100"
)
imported = import_torch_model(model, [tokens], settings, name="gpt8x1024")
with tempfile.TemporaryDirectory() as tmp:  # the file `milp-partition import` writes: the graph and its layer shapes
    path = Path(tmp) / "gpt.json"
    write_imported(imported, str(path))
    data = json.loads(path.read_text())

problem = joint_from_imported(data, "gpt8x1024", LayerPlanSettings(devices=8, memory_bytes=parse_bytes("512MiB", "memory")))
result = solve_joint(problem)
print(f"graph {len(imported.graph.nodes)} nodes -> {len(problem.nodes)} layers, tensor-parallel degrees {list(problem.degrees)}")
print(f"status {result.status}")
print(f"time per sample {result.objective:.6g} s (bound {result.bound:.6g})")
for k, s in enumerate(result.stages, 1):
    print(
        f"  stage {k}: {len(s['nodes'])} layers  d={s['data_parallel']} t={s['tensor_parallel']}  "
        f"{s['memory_bytes'] / 2**30:.2f} GiB per device"
    )
