"""Benchmark of model import: PyTorch and ONNX models in, pipeline plans on 4 H100s out.

Writes ``results/models.md`` and ``results/models.csv``.  For each model defined in
``milp_partition/importers/models.py`` (no weights downloaded) and each granularity: the
training graph's node and edge counts, FLOPs (forward plus traced backward; checked against
FlopCounterMode's whole-model count), parameter bytes, import time on this machine's CPU, and
the plan of ``milp_partition.solve.solve_pipeline`` on 4 accelerators of 80 GiB with the H100
datasheet profile: time per micro-batch (the solver's "time per sample"), status and gap.  The
ONNX export of each model (legacy TorchScript exporter) is imported too, with its FLOPs
compared.  Run from the repository root::

    python benchmarks/models_bench.py [--time-limit 60] [--only NAME]
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from milp_partition.cluster import homogeneous_cluster  # noqa: E402
from milp_partition.importers import ImportSettings  # noqa: E402
from milp_partition.importers import models as M  # noqa: E402
from milp_partition.importers.onnx_import import import_onnx_model  # noqa: E402
from milp_partition.importers.torch_import import import_torch_model  # noqa: E402
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings  # noqa: E402
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline  # noqa: E402

GiB = 2**30
#: name -> (factory, input shape, input dtype, description)
MODELS = {
    "mlp": (lambda: M.mlp(784, 1024, 4, 10), (64, 784), torch.float32, "MLP 784-4x1024-10, batch 64"),
    "resnet50": (lambda: M.resnet50(), (8, 3, 224, 224), torch.float32, "ResNet-50 layout, width 64, batch 8 at 224x224"),
    "gpt12": (
        lambda: M.gpt(),
        (8, 1024),
        torch.long,
        "GPT-2 small layout (12 layers, d 768, 12 heads, vocab 50257, untied head), batch 8 x 1024 tokens",
    ),
}


def make_input(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(shape) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)


def plan(graph, time_limit_s: float):  # type: ignore[no-untyped-def]
    problem = PipelineProblem(graph, homogeneous_cluster(4, 80 * GiB), PipelineSettings())
    return solve_pipeline(problem, SolveSettings(time_limit_s=time_limit_s, threads=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--only", action="append")
    args = parser.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp())
    for name, (factory, shape, dtype, _what) in MODELS.items():
        if args.only and name not in args.only:
            continue
        x = make_input(shape, dtype)
        onnx_path = tmp / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(factory().eval(), (x,), str(onnx_path), dynamo=False)
        for framework in ("torch", "onnx"):
            for granularity in ("operator", "layer"):
                settings = ImportSettings(training=True, granularity=granularity, profile="H100")
                start = time.perf_counter()
                if framework == "torch":
                    torch.manual_seed(0)
                    imported = import_torch_model(factory(), [x], settings, name=name)
                else:
                    imported = import_onnx_model(onnx_path, settings)
                seconds = time.perf_counter() - start
                graph = imported.graph
                ref = imported.captured.reference_flops
                result = plan(graph, args.time_limit)
                row = {
                    "model": name,
                    "input": "x".join(map(str, shape)),
                    "framework": framework,
                    "capture": imported.metadata["capture"],
                    "granularity": granularity,
                    "nodes": len(graph.nodes),
                    "edges": len(graph.edges),
                    "forward_gflop": imported.metadata["forward_flops"] / 1e9,
                    "total_gflop": imported.total_flops / 1e9,
                    "reference_gflop": (ref["forward"] + ref.get("backward", 0.0)) / 1e9 if ref else None,
                    "param_mib": imported.total_param_bytes / 2**20,
                    "import_s": seconds,
                    "status": result.status,
                    "time_per_microbatch_ms": result.objective,
                    "gap": result.gap,
                    "solve_s": result.solve_seconds,
                    "single_device_ms": sum(n.total_time for n in graph.nodes),
                }
                rows.append(row)
                print(
                    f"{name:9s} {framework:5s} {granularity:8s} {row['nodes']:4d} nodes {row['edges']:4d} edges "
                    f"{row['total_gflop']:9.2f} GFLOP import {seconds:6.1f} s  plan {result.status} "
                    f"{result.objective if result.objective is not None else float('nan'):.4f} ms gap {result.gap} ({result.solve_seconds:.1f} s)",
                    flush=True,
                )
    write(rows, args, {name: m[3] for name, m in MODELS.items()})


def _f(x: object, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def write(rows: list[dict], args: argparse.Namespace, what: dict[str, str]) -> None:
    out = REPO / "results"
    out.mkdir(exist_ok=True)
    with open(out / "models.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Model import: PyTorch and ONNX models as training graphs, planned on 4 H100s",
        "",
        "Written by `benchmarks/models_bench.py` (run from the repository root). "
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}; "
        f"solver CP-SAT, 2 threads, {args.time_limit:g} s limit.",
        "",
        "Models (defined in `milp_partition/importers/models.py`, random weights):",
        "",
        *[f"- `{k}`: {v}" for k, v in what.items()],
        "",
        "Training graphs: one backward node per forward node, colocated; memory = parameters + saved activations + 3x "
        "parameters (gradient, Adam moments). Times from the H100 datasheet profile (`--profile H100`). The plan: "
        "`solve_pipeline` on 4 accelerators of 80 GiB, contiguous, static memory model, time per micro-batch = the largest "
        "device load (the solver's `time_per_sample`; one micro-batch is the whole input batch). *1 device* is the sum of "
        "all node times. PyTorch FLOPs are FlopCounterMode's per node (forward and traced backward); *reference* is "
        "FlopCounterMode on the whole eager model. ONNX FLOPs use the formulas of `onnx_flops.py` (they also count "
        "elementwise and normalization FLOPs) and a backward of 2x forward. PyTorch import time: capture with "
        "torch.export and a node-by-node run on the meta device (shapes only); ONNX: load, check, shape inference.",
        "",
        "| model | from | capture | granularity | nodes | edges | GFLOP (fwd+bwd) | reference GFLOP | params MiB | import s | status | time per micro-batch ms | 1 device ms | gap | solve s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['framework']} | {r['capture']} | {r['granularity']} | {r['nodes']} | {r['edges']} | "
            f"{r['total_gflop']:.2f} | {_f(r['reference_gflop'])} | {r['param_mib']:.1f} | {r['import_s']:.1f} | {r['status']} | "
            f"{_f(r['time_per_microbatch_ms'])} | {_f(r['single_device_ms'])} | {_f(r['gap'], 2)} | {r['solve_s']:.1f} |"
        )
    (out / "models.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'models.md'} and {out / 'models.csv'}")


if __name__ == "__main__":
    main()
