"""``milp-partition import torch | hf | onnx``: a model in, a native graph file out.

Registered by :mod:`milp_partition.cli.dispatch` through ``_COMMAND_MODULES``.  Bad input raises
:class:`~milp_partition.errors.InputError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from milp_partition.cli import flags
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError
from milp_partition.importers.build import write_imported
from milp_partition.importers.deps import require
from milp_partition.importers.hf import build_meta_model, load_config, max_positions, parse_overrides, position_warnings
from milp_partition.importers.onnx_import import import_onnx_model
from milp_partition.importers.settings import ImportSettings
from milp_partition.importers.torch_import import build_module, import_torch_model, make_inputs, parse_input_shape

_EPILOG = """examples:
  milp-partition import torch milp_partition.importers.models:gpt --input 8x1024:int64 --training \\
      --granularity layer --profile H100 --output gpt.json
  milp-partition import torch my_models.py:bert --input input_ids=8x512:int64 --input attention_mask=8x512:int64 ...
  milp-partition import hf gpt2 --input 1x1024:int64 --training --granularity layer --output gpt2.json
  milp-partition import hf path/to/config.json --input 1x4096:int64 --training --output llama.json
  milp-partition import onnx model.onnx --input 8x3x224x224 --output model.json
then: milp-partition solve gpt.json --devices 4 --memory 80GiB                   (pipeline: one device per stage)
  or: milp-partition solve gpt.json --problem joint --devices 16 --memory 80GiB  (the joint planner: pipeline stages,
      data and tensor parallelism and recomputation per layer; needs --training --granularity layer)"""


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        "--input-shape",
        dest="input",
        action="append",
        default=[],
        metavar="[NAME=]SHAPE[:DTYPE]",
        help="an input: 8x3x224x224, 8x128:int64 (token ids, drawn from the vocabulary), or by name "
        "attention_mask=8x128:int64 (masks are ones); repeat per input",
    )
    p.add_argument("--dtype", default="float32", help="floating-point dtype of the model and the profile rate (default float32)")
    p.add_argument("--training", action="store_true", help="build a training graph: backward nodes tied to forward nodes")
    p.add_argument("--free-backward", action="store_true", help="do not colocate backward nodes with their forward nodes")
    p.add_argument(
        "--granularity", choices=["operator", "layer"], default="operator", help="one node per operator (default) or per layer"
    )
    p.add_argument(
        "--layer-depth",
        type=flags.count,
        default=None,
        help="module-path depth of a layer (2: h.3 of h.3.attn.qkv); default automatic: the shallowest depth at which "
        "no node that could be split holds more than a quarter of the forward FLOPs",
    )
    p.add_argument(
        "--optimizer-state-factor",
        type=flags.factor,
        default=3.0,
        help="training: resident bytes per parameter byte beyond the weights (gradient + Adam moments = 3, default)",
    )
    p.add_argument(
        "--backward-ratio",
        type=flags.factor,
        default=2.0,
        help="backward FLOPs per forward FLOP where the backward is not traced (default 2)",
    )
    p.add_argument(
        "--profile",
        default="H100",
        help="device profile for times: datasheet name (V100, A100, H100, H200) or profile JSON; 'none' for no times (default H100)",
    )
    p.add_argument("--no-edge-times", action="store_true", help="leave edge transfer times to the cluster's link at solve time")
    p.add_argument("--time-unit", choices=["s", "ms", "us"], default="ms", help="time unit of the graph (default ms)")
    p.add_argument("--output", "-o", type=Path, required=True, help="the native graph JSON to write")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``import`` with its ``torch`` and ``onnx`` subcommands."""
    imp = subparsers.add_parser(
        "import",
        help="import a PyTorch or ONNX model as a graph file (to solve as a pipeline, or with --problem joint: the joint planner)",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kinds = imp.add_subparsers(dest="framework", required=True)
    t = kinds.add_parser(
        "torch", help="a PyTorch module from MODULE:FACTORY", epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    t.add_argument("model", help="MODULE:FACTORY (dotted module or path/to/file.py); the factory returns an nn.Module")
    _add_common(t)
    t.add_argument(
        "--tracer",
        choices=["auto", "export", "fx"],
        default="auto",
        help="auto: torch.export, else torch.fx.symbolic_trace (default)",
    )
    t.add_argument(
        "--execute-on",
        choices=["meta", "cpu"],
        default="meta",
        help="run the model on the meta device (shapes only, fast; default) or on the CPU to count",
    )
    t.add_argument("--measure", action="store_true", help="time each operator on this CPU instead of using a profile")
    t.add_argument("--measure-repeats", type=flags.count, default=3, help="timed runs per operator, median kept (default 3)")
    t.set_defaults(handler=_cmd_import_torch)
    h = kinds.add_parser(
        "hf",
        help="a Hugging Face model from its config (no weights, no download), built on the meta device",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    h.add_argument(
        "config",
        help="a config JSON file (the model's config.json) or a model type transformers knows (gpt2, bert, llama, ...: "
        "its default config); hub names are not downloaded",
    )
    h.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set num_hidden_layers=2 (value read as JSON); repeat",
    )
    _add_common(h)
    h.set_defaults(handler=_cmd_import_hf)
    o = kinds.add_parser("onnx", help="an ONNX file", epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    o.add_argument("model", type=Path, help="the .onnx file")
    _add_common(o)
    o.set_defaults(handler=_cmd_import_onnx)


def settings_from_args(args: argparse.Namespace) -> ImportSettings:
    """The :class:`ImportSettings` of the command line."""
    if args.layer_depth is not None and args.layer_depth < 1:
        raise InputError(f"must be at least 1, got {args.layer_depth}", where="--layer-depth")
    for flag, value in (("--optimizer-state-factor", args.optimizer_state_factor), ("--backward-ratio", args.backward_ratio)):
        if not value >= 0:
            raise InputError(f"must be a non-negative number, got {value}", where=flag)
    measure = bool(getattr(args, "measure", False))
    return ImportSettings(
        granularity=args.granularity,
        layer_depth=args.layer_depth,
        training=args.training,
        colocate_backward=not args.free_backward,
        backward_flops_ratio=args.backward_ratio,
        optimizer_state_bytes_per_param_byte=args.optimizer_state_factor,
        dtype=args.dtype,
        profile=None if str(args.profile).lower() == "none" else args.profile,
        measure=measure,
        execute_on=getattr(args, "execute_on", "meta"),
        measure_repeats=getattr(args, "measure_repeats", 3),
        edge_times=not args.no_edge_times,
        time_unit=args.time_unit,
    )


def _report(imported, output: Path, seconds: float) -> int:  # type: ignore[no-untyped-def]

    write_imported(imported, str(output))
    meta = imported.metadata
    print(f"captured   {imported.captured.name} with {meta['capture']} ({meta['framework']})")
    print(
        f"graph      {meta['nodes']} nodes, {meta['edges']} edges, granularity {meta['granularity']}"
        + (
            f" depth {meta['layer_depth']}" + (" (automatic)" if meta.get("layer_depth_automatic") else "")
            if meta["layer_depth"]
            else ""
        )
        + (", training" if meta["training"] else ", forward only")
    )
    print(f"FLOPs      {meta['flops']:.6g} (forward {meta['forward_flops']:.6g}); parameters {meta['param_bytes']} bytes")
    if meta.get("largest_node"):
        print(f"largest    {meta['largest_node']}: {100 * meta['largest_node_share']:.1f}% of the forward FLOPs")
    ref = meta["reference_flops"]
    if ref:
        counted = {"forward": meta["forward_flops"], "backward": meta["flops"] - meta["forward_flops"]}
        parts = [
            f"{k} {v:.6g}" + (f" ({100 * (counted[k] / v - 1):+.2f}% counted)" if k in counted and v > 0 else "")
            for k, v in ref.items()
            if k in counted
        ]
        print("check      closed form of matrix products, attention, convolutions: " + ", ".join(parts))
    print(f"times      {meta['times']}")
    if meta["unknown_ops"]:
        how = "timed" if imported.settings.measure else "costed by bytes moved"
        print(f"no FLOPs   {how}: " + ", ".join(meta["unknown_ops"]))
    for note in meta["notes"]:
        print(f"note       {note}")
    print(f"wrote      {output} in {seconds:.2f} s")
    return 0


def _cmd_import_torch(args: argparse.Namespace) -> int:

    require("torch")

    check_writable(args.output)
    start = time.perf_counter()
    settings = settings_from_args(args)
    if not args.input:
        raise InputError(
            "give the shape of each model input, e.g. --input 8x3x224x224 or --input input_ids=8x128:int64", where="--input"
        )
    specs = [parse_input_shape(s) for s in args.input]
    module = build_module(args.model)
    inputs, kwargs = make_inputs(specs, settings.dtype, model=module)
    name = args.model.rpartition(":")[2]
    imported = import_torch_model(module, inputs, settings, name=name, tracer=args.tracer, kwargs=kwargs)
    imported.metadata["model"] = {"reference": args.model, "inputs": list(args.input)}
    _warn(imported, position_warnings(module, specs))
    return _report(imported, args.output, time.perf_counter() - start)


def _warn(imported, warnings: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Each warning on stderr and first among the notes (so the file's description keeps it)."""
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    imported.metadata["notes"][:0] = [f"warning: {w}" for w in warnings]


def _cmd_import_hf(args: argparse.Namespace) -> int:

    require("torch")
    check_writable(args.output)
    start = time.perf_counter()
    settings = settings_from_args(args)

    def step(text: str) -> None:  # the import takes tens of seconds: say what it is doing (stderr; after the checks,
        # so that bad input stays one line)
        print(f"[import] {time.perf_counter() - start:6.1f}s  {text}", file=sys.stderr, flush=True)

    config = load_config(args.config, parse_overrides(args.set))
    positions = max_positions(config)
    if not args.input:
        length = min(positions[0], 1024) if positions else 512
        raise InputError(
            f"give the shape of each model input, e.g. --input 1x{length}:int64 (token ids)"
            + (f"; this model has {positions[0]} positions" if positions else ""),
            where="--input",
        )
    specs = [parse_input_shape(s) for s in args.input]
    step(f"building the {config.model_type} model on the meta device (shapes only, no weights)")
    module = build_meta_model(config)
    inputs, kwargs = make_inputs(specs, settings.dtype, model=module)
    name = f"{type(module).__name__} ({config.model_type})"
    step(f"capturing {type(module).__name__}'s operators" + (" and its backward" if settings.training else ""))
    imported = import_torch_model(module, inputs, settings, name=type(module).__name__, kwargs=kwargs)
    step("building the graph file")
    params = sum(p.numel() for p in module.parameters())
    imported.metadata["notes"].insert(
        0,
        f"{name} built from the config on the meta device: shapes only, no weights allocated ({params:,} parameters)",
    )
    _warn(imported, position_warnings(module, specs))
    return _report(imported, args.output, time.perf_counter() - start)


def _cmd_import_onnx(args: argparse.Namespace) -> int:

    check_writable(args.output)
    start = time.perf_counter()
    settings = settings_from_args(args)
    specs = [parse_input_shape(s) for s in args.input]
    if any(spec.name for spec in specs):
        raise InputError("ONNX inputs are matched by position; give shapes without names", where="--input")
    shapes = [spec.shape for spec in specs] or None
    imported = import_onnx_model(args.model, settings, shapes)
    return _report(imported, args.output, time.perf_counter() - start)
