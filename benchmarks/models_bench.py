"""Benchmark of model import on the models users bring, at full size, against closed forms.

Writes ``results/models.md`` and ``results/models.csv``.  Each model (Hugging Face transformers
built from their default configs, no weights; the hand-written MobileNetV3-Large of
``milp_partition/importers/models.py``; torch's ``nn.TransformerEncoder``) is imported with the
default options at layer granularity (automatic depth), as ``milp-partition import torch ...
--granularity layer`` does, each in a fresh process so that its peak memory is its own.  Per
model: forward FLOPs against the closed form of :mod:`milp_partition.importers.zoo` (from the
config, or from module shapes for convolutional networks), the importer's own closed-form check,
backward FLOPs against a closed form where the model is trained, parameter bytes against the
model's unique parameters, node count, the largest node's share of the forward FLOPs, import
time and peak memory.  Then: the ONNX exports of two models (both of torch's exporters), and the
plans of the training graphs on 4 H100s with and without the transfer of saved activations from
a node to its own backward (which never crosses devices).  Run from the repository root::

    python benchmarks/models_bench.py [--only NAME] [--time-limit 60] [--no-onnx] [--no-plans]

The chart ``results/models.png`` (import time, peak memory, the plans' loss) is embedded in the
report; the ONNX rows go to ``results/models_onnx.csv``.  ``--plot-only`` re-renders report and
chart from the CSVs without importing anything (the ONNX section is kept from the report when no
``models_onnx.csv`` exists yet).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from bench_charts import grouped_bars, pyplot, read_csv, save  # noqa: E402

from milp_partition.cluster import homogeneous_cluster  # noqa: E402
from milp_partition.graph import TIME_UNIT_SECONDS, make_graph  # noqa: E402
from milp_partition.importers import ImportSettings  # noqa: E402
from milp_partition.importers import models as M  # noqa: E402
from milp_partition.importers import zoo as Z  # noqa: E402
from milp_partition.importers.build import BACKWARD_SUFFIX  # noqa: E402
from milp_partition.importers.onnx_import import import_onnx_model  # noqa: E402
from milp_partition.importers.timing import load_profile_spec  # noqa: E402
from milp_partition.importers.torch_import import import_torch_model, make_inputs, parse_input_shape  # noqa: E402
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution  # noqa: E402
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline  # noqa: E402
from milp_partition.verifiers.pipeline import verify_pipeline  # noqa: E402

GiB = 2**30
MiB = 2**20


@dataclass(frozen=True)
class Case:
    """One model at one input: how to build it, its inputs (CLI syntax), and its closed forms."""

    name: str
    what: str
    factory: Callable[[], Any]
    inputs: tuple[str, ...]
    training: bool
    forward: Callable[[Any], float]
    backward: Callable[[Any], float] | None = None
    closed_form_of: str = "config"


def _image_flops(model: Any, shape: tuple[int, ...], training: bool) -> tuple[float, float]:
    return Z.module_shape_flops(model, torch.zeros(shape), training=training)


CASES = (
    Case(
        "gpt2-1x1024",
        "GPT-2 small (default GPT2Config: 12 layers, d 768, vocab 50257, tied head, use_cache on), 1 x 1024 tokens",
        Z.gpt2,
        ("input_ids=1x1024:int64",),
        False,
        lambda m: Z.gpt2_forward_flops(m.config, 1, 1024),
    ),
    Case(
        "gpt2-8x1024-train",
        "GPT-2 small as above, 8 x 1024 tokens, training graph",
        Z.gpt2,
        ("input_ids=8x1024:int64",),
        True,
        lambda m: Z.gpt2_forward_flops(m.config, 8, 1024),
        lambda m: 2 * Z.gpt2_forward_flops(m.config, 8, 1024),
    ),
    Case(
        "bert-base-8x512",
        "BERT-base with its masked-LM head (default BertConfig, tied decoder), 8 x 512 tokens with attention mask",
        Z.bert,
        ("input_ids=8x512:int64", "attention_mask=8x512:int64"),
        False,
        lambda m: Z.bert_forward_flops(m.config, 8, 512),
    ),
    Case(
        "llama12-1x1024",
        "Llama-style causal LM, 12 layers, d 768, 12/4 query/kv heads, vocab 32000, default use_cache, 1 x 1024 tokens",
        Z.llama,
        ("input_ids=1x1024:int64",),
        False,
        lambda m: Z.llama_forward_flops(m.config, 1, 1024),
    ),
    Case(
        "t5-small-8x512",
        "T5-small (default T5Config, tied head), encoder 8 x 512, decoder 8 x 512 tokens",
        Z.t5,
        ("input_ids=8x512:int64", "decoder_input_ids=8x512:int64"),
        False,
        lambda m: Z.t5_forward_flops(m.config, 8, 512, 512),
    ),
    Case(
        "vit-b16-8x224",
        "ViT-B/16 (default ViTConfig, 1000 labels), 8 images of 224 x 224",
        Z.vit,
        ("8x3x224x224",),
        False,
        lambda m: Z.vit_forward_flops(m.config, 8),
    ),
    Case(
        "mobilenetv3-8x224-train",
        "MobileNetV3-Large (torchvision's layout written out, 5.48 M parameters), 8 images of 224 x 224, training graph",
        M.mobilenet_v3_large,
        ("8x3x224x224",),
        True,
        lambda m: _image_flops(m, (8, 3, 224, 224), False)[0],
        lambda m: _image_flops(m, (8, 3, 224, 224), True)[1],
        "module shapes",
    ),
    Case(
        "convnext-t-8x224-train",
        "ConvNeXt-T (default ConvNextConfig), 8 images of 224 x 224, training graph",
        Z.convnext,
        ("8x3x224x224",),
        True,
        lambda m: _image_flops(m, (8, 3, 224, 224), False)[0],
        lambda m: _image_flops(m, (8, 3, 224, 224), True)[1],
        "module shapes",
    ),
    Case(
        "tenc-12x768-8x512",
        "torch nn.TransformerEncoder, 12 post-norm layers, d 768, 12 heads, FFN 3072, 8 x 512 tokens",
        lambda: M.transformer_encoder(768, 12, 12, 3072),
        ("8x512x768",),
        False,
        lambda m: 12 * (2 * 8 * 512 * (4 * 768 * 768 + 2 * 768 * 3072) + 4 * 8 * 512 * 512 * 768),
    ),
)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def run_one(case: Case) -> dict[str, Any]:
    """Build and import one model in this process; the row of the table."""
    torch.manual_seed(0)
    start = time.perf_counter()
    model = case.factory()
    build_s = time.perf_counter() - start
    args, kwargs = make_inputs([parse_input_shape(t) for t in case.inputs], "float32", model=model)
    rss_before = _rss_bytes()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = import_torch_model(
            model, args, ImportSettings(granularity="layer", training=case.training), name=case.name, kwargs=kwargs
        )
    import_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    meta = imported.metadata
    closed_fwd = case.forward(model)
    closed_bwd = case.backward(model) if case.backward else None
    unique = Z.unique_parameter_bytes(model)
    bwd = meta["flops"] - meta["forward_flops"]
    row = {
        "model": case.name,
        "input": " ".join(case.inputs),
        "training": case.training,
        "capture": meta["capture"],
        "path": "cpu fallback" if any("ran on the CPU" in n for n in meta["notes"]) else "meta",
        "depth": meta["layer_depth"],
        "nodes": sum(1 for n in imported.graph.nodes if not n.is_backward),
        "forward_gflop": meta["forward_flops"] / 1e9,
        "closed_form_gflop": closed_fwd / 1e9,
        "closed_form_of": case.closed_form_of,
        "forward_err_pct": 100 * (meta["forward_flops"] / closed_fwd - 1),
        "check_err_pct": 100 * (meta["forward_flops"] / meta["reference_flops"]["forward"] - 1),
        "backward_gflop": bwd / 1e9 if case.training else None,
        "closed_backward_gflop": closed_bwd / 1e9 if closed_bwd else None,
        "backward_err_pct": 100 * (bwd / closed_bwd - 1) if closed_bwd else None,
        "param_mib": meta["param_bytes"] / MiB,
        "unique_param_mib": unique / MiB,
        "param_err_pct": 100 * (meta["param_bytes"] / unique - 1),
        "largest_node": meta["largest_node"],
        "largest_share_pct": 100 * meta["largest_node_share"],
        "import_s": import_s,
        "build_s": build_s,
        "rss_before_mib": rss_before / MiB,
        "peak_rss_mib": peak / MiB,
        "notes": " | ".join(n for n in meta["notes"] if not n.startswith("captured in eval")),
    }
    if case.training:
        row["plans"] = plan_comparison(imported.graph)
    return row


def plan_comparison(graph: Any, time_limit_s: float = 60.0) -> dict[str, Any]:
    """Optima on 4 and 8 x 80 GiB H100 of the graph as imported, and of the old graph (v -> v:bwd carrying saved activations).

    The old graph charges each forward node's saved activations as a transfer (H100 datasheet
    link, as the import did) to its own colocated backward node; the pipeline cost takes a node's
    largest out-edge as its output transfer, so this inflates the cost of cutting after it.  The
    old graph's optimal plan is then evaluated by the verifier on the corrected graph.
    """
    profile = load_profile_spec("H100")
    unit_s = TIME_UNIT_SECONDS[graph.time_unit]
    forward = {n.id: n for n in graph.nodes if not n.is_backward}

    def saved(e: Any) -> Any:
        nbytes = forward[e.source].activation_bytes
        return replace(e, bytes=nbytes, transfer_time=profile.transfer_time_s(nbytes, "d2d") / unit_s)

    old_edges = [saved(e) if e.target == e.source + BACKWARD_SUFFIX else e for e in graph.edges]
    old = make_graph(list(graph.nodes), old_edges, name=graph.name + " (old)", time_unit=graph.time_unit)
    settings = SolveSettings(time_limit_s=time_limit_s, threads=2)
    result: dict[str, Any] = {}
    for devices in (4, 8):
        cluster = homogeneous_cluster(devices, 80 * GiB)
        new_problem = PipelineProblem(graph, cluster, PipelineSettings())
        best = solve_pipeline(new_problem, settings)
        old_plan = solve_pipeline(PipelineProblem(old, cluster, PipelineSettings()), settings)
        on_new = verify_pipeline(new_problem, PipelineSolution(old_plan.assignment)) if old_plan.assignment else None
        result[str(devices)] = {
            "status": best.status,
            "optimum_ms": best.objective,
            "old_status": old_plan.status,
            "old_objective_ms": old_plan.objective,
            "old_plan_on_new_ms": on_new.objective if on_new is not None and on_new.feasible else None,
        }
    return result


def run_onnx(name: str, exporter: str, tmp: Path) -> dict[str, Any]:
    """Export one model with one of torch's exporters and import the file at layer granularity."""
    torch.manual_seed(0)
    if name == "gpt2":
        model = Z.gpt2(use_cache=False).eval()
        x = make_inputs([parse_input_shape("1x1024:int64")], "float32", model=model)[0][0]
        closed = Z.gpt2_forward_flops(model.config, 1, 1024)
    else:
        model = M.mobilenet_v3_large().eval()
        x = torch.randn(8, 3, 224, 224)
        closed = _image_flops(model, (8, 3, 224, 224), False)[0]
    path = tmp / f"{name}_{exporter}.onnx"
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=exporter == "dynamo")
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    imported = import_onnx_model(path, ImportSettings(granularity="layer"))
    unique = Z.unique_parameter_bytes(model)
    return {
        "model": name,
        "exporter": exporter,
        "export_s": export_s,
        "import_s": time.perf_counter() - start,
        "nodes": len(imported.graph.nodes),
        "edges": len(imported.graph.edges),
        "depth": imported.metadata["layer_depth"],
        "matmul_gflop": imported.captured.flops_by_kind["matmul"] / 1e9,
        "closed_form_gflop": closed / 1e9,
        "param_mib": imported.total_param_bytes / MiB,
        "unique_param_mib": unique / MiB,
        "largest_share_pct": 100 * imported.metadata["largest_node_share"],
        "notes": " | ".join(imported.metadata["notes"]),
    }


def _child(args: list[str]) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    cmd = [sys.executable, __file__, *args, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " / ".join(tail)}
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="model name (repeatable)")
    parser.add_argument("--no-onnx", action="store_true")
    parser.add_argument("--no-plans", action="store_true")
    parser.add_argument("--time-limit", type=float, default=60.0, help="solver limit per plan (s)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--onnx-one", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSVs")
    args = parser.parse_args()
    if args.plot_only:
        plot_only()
        return
    if args.one:
        row = run_one(next(c for c in CASES if c.name == args.one))
        Path(args.json).write_text(json.dumps(row))
        return
    if args.onnx_one:
        Path(args.json).write_text(json.dumps(run_onnx(*args.onnx_one, Path(tempfile.mkdtemp()))))
        return
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        row = {"model": case.name, **_child(["--one", case.name])}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "notes"}), flush=True)
    onnx_rows = []
    if not args.no_onnx:
        for name in ("gpt2", "mobilenetv3"):
            for exporter in ("dynamo", "torchscript"):
                row = {"model": name, "exporter": exporter, **_child(["--onnx-one", name, exporter])}
                onnx_rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "notes"}), flush=True)
    write(rows, onnx_rows, {c.name: c.what for c in CASES})


def _f(x: object, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.{digits}g}"
    return str(x)


def _pct(x: object) -> str:
    return "-" if x is None else f"{x:+.3f}%"


def _unflatten(row: dict[str, Any]) -> dict[str, Any]:
    """A row of ``models.csv`` back as :func:`write` got it: ``planD_KEY`` columns into ``plans[D][KEY]``, no empty error."""
    out: dict[str, Any] = {}
    plans: dict[str, dict[str, Any]] = {}
    for k, v in row.items():
        head, _, rest = k.partition("_")
        if head.startswith("plan") and head[4:].isdigit() and rest:
            plans.setdefault(head[4:], {})[rest] = v
        elif not (k == "error" and v is None):
            out[k] = v
    out["plans"] = {d: p for d, p in plans.items() if any(v is not None for v in p.values())}
    return out


def plot_only() -> None:
    """Re-render ``models.md`` and the chart from ``models.csv`` (and ``models_onnx.csv`` when it exists)."""
    out = REPO / "results"
    rows = [_unflatten(r) for r in read_csv(out / "models.csv")]
    onnx_path = out / "models_onnx.csv"
    onnx_rows = (
        [{k: v for k, v in r.items() if not (k == "error" and v is None)} for r in read_csv(onnx_path)]
        if onnx_path.is_file()
        else []
    )
    kept = ""
    if not onnx_rows and (out / "models.md").is_file():
        text = (out / "models.md").read_text()
        start = text.find("## ONNX files")
        kept = text[start:].rstrip("\n") if start >= 0 else ""
    write(rows, onnx_rows, {c.name: c.what for c in CASES}, plot_only=True, kept_onnx=kept)


def chart(rows: list[dict[str, Any]]) -> Any:
    """Import seconds and peak memory per model; each plan's loss from the old transfer to a node's own backward."""
    plt = pyplot()
    ok = [r for r in rows if "error" not in r]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 5), gridspec_kw={"width_ratios": [3, 3, 2]})
    names = [r["model"] for r in ok]
    grouped_bars(ax1, names, [("import", [float(r["import_s"]) for r in ok], [True] * len(ok))], log=False)
    ax1.set_ylabel("seconds (one process per model)")
    ax1.set_title("import time", fontsize=10)
    grouped_bars(
        ax2, names,
        [("RSS before the import", [float(r["rss_before_mib"]) for r in ok], [True] * len(ok)),
         ("peak RSS", [float(r["peak_rss_mib"]) for r in ok], [True] * len(ok))],
        log=False,
    )  # fmt: skip
    ax2.set_ylabel("MiB")
    ax2.set_title("resident memory of the importing process", fontsize=10)
    planned = [r for r in ok if r.get("plans")]
    devices = sorted({d for r in planned for d in r["plans"]}, key=int)
    series = []
    for d in devices:
        values = []
        for r in planned:
            p = r["plans"].get(d, {})
            new, old = p.get("optimum_ms"), p.get("old_plan_on_new_ms")
            values.append(100 * (float(old) / float(new) - 1) if new and old else None)
        series.append((f"{d} H100s", values, [r["plans"].get(d, {}).get("status") == "optimal" for r in planned]))
    grouped_bars(ax3, [r["model"] for r in planned], series, log=False)
    ax3.set_ylabel("old plan on the corrected graph: worse by (%)")
    ax3.set_title("plans: the transfer to a node's own backward", fontsize=10)
    fig.tight_layout()
    return fig


def write(
    rows: list[dict[str, Any]],
    onnx_rows: list[dict[str, Any]],
    what: dict[str, str],
    *,
    plot_only: bool = False,
    kept_onnx: str = "",
) -> None:
    out = REPO / "results"
    out.mkdir(exist_ok=True)
    if not plot_only:
        flat = [
            {k: v for k, v in r.items() if k != "plans"}
            | {f"plan{d}_{k}": v for d, plan in r.get("plans", {}).items() for k, v in plan.items()}
            for r in rows
        ]
        fields = sorted({k for r in flat for k in r}, key=lambda k: (k != "model", k))
        with open(out / "models.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(flat)
        if onnx_rows:
            onnx_fields = sorted({k for r in onnx_rows for k in r}, key=lambda k: (k not in ("model", "exporter"), k))
            with open(out / "models_onnx.csv", "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=onnx_fields)
                writer.writeheader()
                writer.writerows(onnx_rows)
    png = save(chart(rows), out / "models.png")
    lines = [
        "# Model import at full size: FLOPs, parameters and layers against closed forms",
        "",
        "Written by `benchmarks/models_bench.py` (run from the repository root). "
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        "shared by other jobs while this ran (times are wall clock). No weights are downloaded: every model is built "
        "from its config with random weights.",
        "",
        *(
            [
                "Re-rendered from `models.csv` by `--plot-only` (nothing was imported; the machine line is the renderer's"
                + ("; the ONNX section is kept from the previous report)." if kept_onnx else ")."),
                "",
            ]
            if plot_only
            else []
        ),
        f"![{png}]({png})",
        "",
        "Models:",
        "",
        *[f"- `{k}`: {v}" for k, v in what.items() if any(r["model"] == k for r in rows)],
        "",
        "Each model is imported as `milp-partition import torch ... --granularity layer` does by default (automatic layer "
        "depth, meta device, H100 datasheet times), in its own process. *closed form*: forward FLOPs from the config "
        "(`milp_partition/importers/zoo.py`: matrix products and attention, 2 per multiply-add, causal masks not "
        "discounted) or from the weight shapes of every convolution and linear layer (*module shapes*). *check*: the "
        "importer's own closed-form check (per captured operator, independent of FlopCounterMode) against its count. "
        "Backward closed form: 2x forward for the transformer (every product needs both gradients); for the "
        "convolutional networks the weight gradient of every layer plus the input gradient of every layer but the "
        "first. *params*: parameter bytes of the graph against the model's unique parameters (tied ones once). "
        "*largest*: the node with the most forward FLOPs and its share. *peak RSS*: peak resident memory of the process "
        "that built the model (random weights on the CPU) and imported it; *RSS before*: before the import.",
        "",
        "| model | capture | path | depth | nodes | fwd GFLOP | closed form | fwd err | check err | bwd GFLOP | bwd closed form | bwd err | params MiB | unique MiB | params err | largest node | share | import s | RSS before MiB | peak RSS MiB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | failed: {r['error']} |" + " |" * 19)
            continue
        lines.append(
            f"| {r['model']} | {r['capture']} | {r['path']} | {r['depth']} | {r['nodes']} | {_f(r['forward_gflop'], 6)} | "
            f"{_f(r['closed_form_gflop'], 6)} ({r['closed_form_of']}) | {_pct(r['forward_err_pct'])} | {_pct(r['check_err_pct'])} | "
            f"{_f(r['backward_gflop'], 6)} | {_f(r['closed_backward_gflop'], 6)} | {_pct(r['backward_err_pct'])} | "
            f"{r['param_mib']:.2f} | {r['unique_param_mib']:.2f} | {_pct(r['param_err_pct'])} | {r['largest_node']} | "
            f"{r['largest_share_pct']:.1f}% | {r['import_s']:.1f} | {r['rss_before_mib']:.0f} | {r['peak_rss_mib']:.0f} |"
        )
    notes = [(r["model"], r["notes"]) for r in rows if r.get("notes")]
    if notes:
        lines += ["", "Import notes per model:", ""] + [f"- `{m}`: {n}" for m, n in notes]
    planned = [r for r in rows if r.get("plans")]
    if planned:
        lines += [
            "",
            "## Plans on 4 and 8 H100s: the transfer to a node's own backward",
            "",
            "The training graphs above solved with `solve_pipeline` (accelerators of 80 GiB, contiguous, static memory, "
            "CP-SAT with 2 threads) as imported, where the edge from a node to its own colocated backward carries no bytes, "
            "and with that edge carrying the saved activations (the import before this change). The old graph's optimal "
            "plan is then evaluated by the verifier on the corrected graph. Times per micro-batch in ms.",
            "",
            "| model | devices | status | optimum | old graph: status | its objective | its plan on the corrected graph | worse by |",
            "|---|---:|---|---:|---|---:|---:|---:|",
        ]
        for r in planned:
            for devices, p in r["plans"].items():
                worse = (
                    f"{100 * (p['old_plan_on_new_ms'] / p['optimum_ms'] - 1):.2f}%"
                    if p["old_plan_on_new_ms"] and p["optimum_ms"]
                    else "-"
                )
                lines.append(
                    f"| {r['model']} | {devices} | {p['status']} | {_f(p['optimum_ms'], 6)} | {p['old_status']} | "
                    f"{_f(p['old_objective_ms'], 6)} | {_f(p['old_plan_on_new_ms'], 6)} | {worse} |"
                )
    if onnx_rows:
        lines += [
            "",
            "## ONNX files from both of torch's exporters",
            "",
            "GPT-2 small (use_cache off for the export, 1 x 1024 tokens) and MobileNetV3-Large (8 x 224 x 224) exported by "
            "`torch.onnx.export(dynamo=True)` (the default, needs `onnxscript`) and `dynamo=False` (TorchScript), then "
            "`milp-partition import onnx --granularity layer`. *matmul GFLOP*: the ONNX formulas' FLOPs of products and "
            "convolutions against the closed form; *params*: against the model's unique parameters (the exporters fold "
            "constants, e.g. GPT-2's position embedding rows, so small differences remain).",
            "",
            "| model | exporter | export s | import s | depth | nodes | edges | matmul GFLOP | closed form | params MiB | unique MiB | largest share |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in onnx_rows:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['exporter']} | failed: {r['error']} |" + " |" * 9)
                continue
            lines.append(
                f"| {r['model']} | {r['exporter']} | {r['export_s']:.1f} | {r['import_s']:.1f} | {r['depth']} | {r['nodes']} | "
                f"{r['edges']} | {_f(r['matmul_gflop'], 6)} | {_f(r['closed_form_gflop'], 6)} | {r['param_mib']:.2f} | "
                f"{r['unique_param_mib']:.2f} | {r['largest_share_pct']:.1f}% |"
            )
        lines += ["", "ONNX notes:", ""] + [f"- `{r['model']}` ({r['exporter']}): {r.get('notes', '')}" for r in onnx_rows]
    elif kept_onnx:
        lines += ["", kept_onnx]
    (out / "models.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'models.md'}" + ("" if plot_only else f" and {out / 'models.csv'}") + f" and {out / png}")


if __name__ == "__main__":
    main()
