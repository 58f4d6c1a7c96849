"""Import a PyTorch model: ``MODULE:FACTORY`` and input shapes in, a graph out.

The Python API is :func:`import_torch` (a :class:`~milp_partition.graph.Graph`) and
:func:`import_torch_model` (the graph with its records and metadata).  Needs the ``torch`` extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.graph import Graph
from milp_partition.importers.build import ImportedGraph, build_graph
from milp_partition.importers.deps import require
from milp_partition.importers.layer_shapes import module_shapes
from milp_partition.importers.settings import ImportSettings


@dataclass(frozen=True)
class InputSpec:
    """One example input: its shape, for non-float inputs its dtype (``int64`` token ids), and its name if passed by name."""

    shape: tuple[int, ...]
    dtype: str | None = None
    name: str | None = None


def parse_input_shape(text: str, where: str = "--input") -> InputSpec:
    """Parse ``8x3x224x224``, ``8x128:int64`` or a named input ``attention_mask=8x128:int64``.

    Raises
    ------
    InputError
        When a dimension is not a positive integer or the name is not an identifier.
    """
    name, eq, rest = text.partition("=")
    if eq:
        name = name.strip()
        if not name.isidentifier():
            raise InputError(f"input name must be a Python identifier (NAME=SHAPE), got {name!r} in {text!r}", where=where)
    else:
        name, rest = "", text
    shape_text, _, dtype = rest.partition(":")
    try:
        shape = tuple(int(d) for d in shape_text.lower().split("x"))
    except ValueError:
        raise InputError(
            f"must be dimensions joined by 'x', optionally ':dtype' and a leading 'name=' "
            f"(8x3x224x224, 8x128:int64, attention_mask=8x128:int64), got {text!r}",
            where=where,
        ) from None
    if not shape or any(d <= 0 for d in shape):
        raise InputError(f"dimensions must be positive integers, got {text!r}", where=where)
    elements = math.prod(shape)
    if elements > MAX_INPUT_ELEMENTS:
        raise InputError(
            f"{text!r} has {elements:,} elements, more than the {MAX_INPUT_ELEMENTS:,} (4 GiB at float32) an example "
            "input may hold; give a smaller shape (FLOPs and bytes scale with the batch)",
            where=where,
        )
    return InputSpec(shape, dtype or None, name or None)


#: The most elements one example input may have: it is built as a tensor in memory before the capture.
MAX_INPUT_ELEMENTS = 2**30


def vocabulary_size(model: Any) -> int | None:
    """Size of the model's token vocabulary: ``config.vocab_size``, else its smallest ``nn.Embedding``; ``None`` if neither."""
    torch = require("torch")
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(size, int) and size > 0:
        return size
    if not isinstance(model, torch.nn.Module):
        return None
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    return min(sizes) if sizes else None


def make_inputs(specs: Sequence[InputSpec], dtype: str, seed: int = 0, model: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """Example tensors, positional and named, with realistic values.

    Floating point: standard normal in ``dtype`` (or the spec's dtype).  Integer and boolean,
    by the input's name: ``*mask*`` all ones (attend everywhere), ``token_type_ids`` zeros,
    ``position_ids`` ``0, 1, ...`` along the last dimension, anything else (token ids) uniform
    in ``[0, V)`` with ``V`` the model's vocabulary (:func:`vocabulary_size`; 2 if unknown).

    Raises
    ------
    InputError
        On an unknown dtype or a name given twice.
    """
    torch = require("torch")
    gen = torch.Generator().manual_seed(seed)
    vocab = vocabulary_size(model) if model is not None else None
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for spec in specs:
        name = spec.dtype or dtype
        tdtype = getattr(torch, name, None)
        if not isinstance(tdtype, torch.dtype):
            raise InputError(f"unknown dtype {name!r} (use e.g. float32, bfloat16, int64)", where="--input")
        label = (spec.name or "").lower()
        if tdtype.is_floating_point:
            value = torch.randn(spec.shape, generator=gen, dtype=tdtype)
        elif tdtype == torch.bool or "mask" in label:
            value = torch.ones(spec.shape, dtype=tdtype)
        elif label == "token_type_ids":
            value = torch.zeros(spec.shape, dtype=tdtype)
        elif label == "position_ids":
            value = torch.arange(spec.shape[-1], dtype=tdtype).expand(spec.shape).contiguous()
        else:
            value = torch.randint(0, vocab or 2, spec.shape, generator=gen, dtype=tdtype)
        if spec.name is None:
            args.append(value)
        elif spec.name in kwargs:
            raise InputError(f"input {spec.name!r} is given twice", where="--input")
        else:
            kwargs[spec.name] = value
    return args, kwargs


def load_factory(spec: str) -> Callable[[], Any]:
    """The callable named by ``MODULE:FACTORY`` (``MODULE`` a dotted module or a ``.py`` path).

    Raises
    ------
    InputError
        When the module cannot be imported or has no such callable (naming what it does have).
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"must be MODULE:FACTORY (e.g. milp_partition.importers.models:gpt), got {spec!r}", where="model")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise InputError("no such file; check the path", source=module_name)
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            assert loader_spec is not None and loader_spec.loader is not None
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules.setdefault(path.stem, module)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except InputError:
        raise
    except ImportError as exc:
        raise InputError(f"cannot import module {module_name!r}: {exc}", where="model") from None
    except SystemExit as exc:
        raise InputError(f"importing module {module_name!r} failed: it called sys.exit({exc.code!r})", where="model") from None
    except Exception as exc:
        raise InputError(f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}", where="model") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        public = {n: v for n, v in vars(module).items() if callable(v) and not n.startswith("_")}
        # functions defined in the module first (the likely factories), then classes and imported names
        own = sorted(n for n, v in public.items() if inspect.isfunction(v) and v.__module__ == module.__name__)
        available = (own + sorted(set(public) - set(own)))[:12]
        raise InputError(
            f"module {module_name!r} has no factory {attr!r}" + (f"; it defines: {', '.join(available)}" if available else ""),
            where="model",
        )
    return factory


def build_module(spec: str) -> Any:
    """Call the factory of ``spec``; it returns an ``nn.Module`` (or a tuple whose first item is one)."""
    torch = require("torch")
    factory = load_factory(spec)
    try:
        model = factory()
    except SystemExit as exc:  # not the tool's exit: the factory's failure (exit 3 would read as "proven infeasible")
        raise InputError(f"factory {spec!r} failed: it called sys.exit({exc.code!r})", where="model") from None
    except Exception as exc:
        raise InputError(f"factory {spec!r} failed: {type(exc).__name__}: {exc}", where="model") from None
    if isinstance(model, tuple) and model:
        model = model[0]
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"factory {spec!r} returned {type(model).__name__}, not a torch.nn.Module", where="model")
    return model


def import_torch_model(
    module: Any,
    example_inputs: Sequence[Any],
    settings: ImportSettings | None = None,
    *,
    name: str | None = None,
    tracer: str = "auto",
    kwargs: Mapping[str, Any] | None = None,
) -> ImportedGraph:
    """Capture ``module`` on ``example_inputs`` and build its graph, with records and metadata.

    Parameters
    ----------
    module
        A ``torch.nn.Module`` (put in eval mode and cast to ``settings.dtype``).
    example_inputs
        Positional inputs of ``forward`` (tensors of the shapes to plan for).
    settings
        Granularity, training, profile, measurement.
    name
        Graph name (default: the module's class name).
    tracer
        ``"auto"`` (``torch.export``, else ``torch.fx.symbolic_trace``), ``"export"`` or ``"fx"``.
    kwargs
        Named inputs of ``forward`` (``attention_mask``, ``decoder_input_ids``).

    Raises
    ------
    InputError
        When the inputs do not fit, no tracer captures the model, or the profile is unknown.
    """
    from milp_partition.importers.torch_capture import capture_module

    settings = settings or ImportSettings()
    captured = capture_module(module, example_inputs, settings, name=name or type(module).__name__, tracer=tracer, kwargs=kwargs)
    captured = replace(captured, module_shapes=module_shapes(module), batch_size=_batch_size(example_inputs, kwargs))
    return build_graph(captured, settings)


def _batch_size(example_inputs: Sequence[Any], kwargs: Mapping[str, Any] | None) -> int | None:
    """The first dimension of the first tensor input (positional first, then named), ``None`` if there is none."""
    for x in [*example_inputs, *(kwargs or {}).values()]:
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape) >= 1:
            return int(shape[0])
    return None


def import_torch(module: Any, example_inputs: Sequence[Any], settings: ImportSettings | None = None) -> Graph:
    """The graph of ``module`` on ``example_inputs`` (see :func:`import_torch_model`); default settings if ``None``."""
    return import_torch_model(module, example_inputs, settings).graph
