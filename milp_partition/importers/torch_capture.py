"""Capture a PyTorch module as operator records: FLOPs, bytes, saved activations, times.

The module is captured with :func:`torch.export.export` (its ATen graph, unlifted with
``ExportedProgram.module()``), or, where export fails, with :func:`torch.fx.symbolic_trace`.
The captured graph is then executed once on real example inputs, one node at a time, each
node on detached copies of its inputs, so that for every node alone we get

* its forward FLOPs, counted by :class:`torch.utils.flop_counter.FlopCounterMode`;
* with ``training``, its backward FLOPs, counted the same way over
  ``torch.autograd.grad(outputs, inputs that require grad)`` (the traced backward of this node);
* the activations autograd saves for its backward (``saved_tensors_hooks``; each storage once);
* its input, output and first-used parameter and buffer bytes;
* with ``measure``, the median wall time of its forward and backward on this CPU;
* its closed-form FLOPs (:mod:`.closed_form`), summed as an independent check of the counter.

The counter is ``FlopCounterMode`` with this project's formulas (:mod:`.flop_formulas`:
grouped-convolution backward, attention on the CPU).  Operators it does not know (elementwise,
normalizations, copies) get zero FLOPs and are costed by the bytes they move; a view (an output
that aliases an input) moves no bytes.

What the copy of the model is made to do, each said in the notes:

* parameters shared by several modules (a tied LM head) stay shared on the copy, so each
  storage is counted once, in the first operator that reads it;
* a Hugging Face style model whose ``config.use_cache`` is on is run with it off (the key/value
  cache is an inference-only output that the tracers cannot return);
* the fused fast path of ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer`` is off (its
  kernels have no FLOP formula), so they run as their separate products;
* a custom ``torch.autograd.Function`` is detected on the eager model; its backward is not the
  one the traced graph differentiates, so with ``training`` its eager backward is counted and
  the difference is reported.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import operator
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map

from milp_partition.calibration.timing import median_seconds
from milp_partition.errors import InputError
from milp_partition.importers.closed_form import operator_closed_form
from milp_partition.importers.flop_formulas import flop_counter
from milp_partition.importers.records import CapturedModel, OpRecord, TensorUse
from milp_partition.importers.settings import ImportSettings

#: Values of ``ImportSettings``-independent tracer choice.
TRACERS: tuple[str, ...] = ("auto", "export", "fx")


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message, shortened to ``limit`` characters."""
    text = str(exc).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def tensor_bytes(x: Any) -> int:
    """Bytes of a tensor's elements (0 for anything else)."""
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _loss_of(out: Any) -> torch.Tensor | None:
    """Sum of the floating-point outputs that need a gradient (a scalar to differentiate), or ``None``."""
    leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    return sum((t.float().sum() for t in leaves), torch.zeros((), device=leaves[0].device)) if leaves else None


def custom_functions(out: Any) -> list[str]:
    """Names of the custom ``torch.autograd.Function`` s in the autograd graph of ``out`` (sorted)."""
    found: set[str] = set()
    seen: set[int] = set()
    stack: list[Any] = [t.grad_fn for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, torch.autograd.function.BackwardCFunction):
            found.add(type(fn).__name__.removesuffix("Backward"))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return sorted(found)


@contextlib.contextmanager
def _no_fused_attention() -> Iterator[None]:
    """Turn off the fused fast path of ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` (restored after)."""
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(before)


@contextlib.contextmanager
def _quiet_tracers() -> Iterator[None]:
    """Silence torch's log lines, warnings and stderr prints while tracing (failures come back as one-line errors)."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def capture_graph(
    module: nn.Module, inputs: Sequence[Any], tracer: str = "auto", kwargs: Mapping[str, Any] | None = None
) -> tuple[torch.fx.GraphModule, str, list[str]]:
    """Capture ``module`` called as ``module(*inputs, **kwargs)`` as an FX graph module.

    Returns
    -------
    (graph module, method, notes)
        ``method`` is ``"torch.export"`` or ``"torch.fx.symbolic_trace"``.

    Raises
    ------
    InputError
        When no tracer captures it, naming each tracer's first line of error.
    """
    if tracer not in TRACERS:
        raise InputError(f"must be one of {', '.join(TRACERS)}, got {tracer!r}", where="--tracer")
    notes: list[str] = []
    errors: list[str] = []
    if tracer in ("auto", "export"):
        try:
            with _quiet_tracers():
                program = torch.export.export(module, tuple(inputs), dict(kwargs or {}))
            return program.module(), "torch.export", notes
        except Exception as exc:
            errors.append(f"torch.export failed: {one_line(exc)}")
    if tracer in ("auto", "fx"):
        try:
            with _quiet_tracers():
                concrete = {k: v for k, v in (kwargs or {}).items() if not isinstance(v, torch.Tensor)}
                gm = torch.fx.symbolic_trace(module, concrete_args=concrete or None)
            notes.extend(f"{e}; fell back to torch.fx.symbolic_trace" for e in errors)
            return gm, "torch.fx.symbolic_trace", notes
        except Exception as exc:
            errors.append(f"torch.fx.symbolic_trace failed: {one_line(exc)}")
    raise InputError("the tracer cannot capture this model: " + "; ".join(errors))


def _module_path(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return path if isinstance(path, str) and not path.startswith("L[") else ""


def _op_type(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def _is_view(node: torch.fx.Node) -> bool:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        returns = target._schema.returns
        return bool(returns) and returns[0].alias_info is not None and not returns[0].alias_info.is_write
    return False


def _storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage (shared by its views; valid on the meta device too)."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return id(t)


def _leaf(x: Any) -> Any:
    """A detached copy of an activation, keeping whether it needs a gradient."""
    if isinstance(x, torch.Tensor):
        return x.detach().requires_grad_(x.requires_grad and x.is_floating_point())
    return x


class _Recorder:
    """Runs a graph module node by node and records each operator (one job: the walk)."""

    def __init__(self, gm: torch.fx.GraphModule, settings: ImportSettings) -> None:
        self.gm = gm
        self.settings = settings
        self.env: dict[torch.fx.Node, Any] = {}
        self.producer: dict[torch.fx.Node, str] = {}  # node -> recorded op id whose output it is
        self.ops: list[OpRecord] = []
        self.uses: list[TensorUse] = []
        self.seen_state: set[int] = set()
        self.seen_saved: set[int] = set()
        self.state_keys: set[int] = {_storage_key(t) for t in [*gm.parameters(), *gm.buffers()]}
        self.keep_alive: list[torch.Tensor] = []
        self.closed_form: dict[str, float] = {"forward": 0.0, "backward": 0.0}
        self.closed_form_by_kind: dict[str, float] = {}

    def run(self, inputs: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> None:
        """Run the graph on ``inputs`` (positional) and ``kwargs`` (matched to placeholders by name)."""
        kwargs = dict(kwargs or {})
        positional = iter(inputs)
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                name = str(node.target).removeprefix("*")
                if name in kwargs:
                    self.env[node] = kwargs[name]
                else:
                    default = node.args[0] if node.args else None
                    self.env[node] = next(positional, default)
            elif node.op == "get_attr":
                self.env[node] = _fetch_attr(self.gm, str(node.target))
            elif node.op == "output":
                return
            elif node.op == "call_function" and node.target is operator.getitem:
                self.env[node] = operator.getitem(*torch.fx.node.map_arg(node.args, self.env.__getitem__))
                source = node.args[0]
                if source in self.producer:
                    self.producer[node] = self.producer[source]
            else:
                self._record(node)

    def _state_bytes(self, tensors: list[torch.Tensor]) -> tuple[int, int]:
        params = buffers = 0
        for t in tensors:
            key = _storage_key(t)
            if key in self.seen_state:
                continue
            self.seen_state.add(key)
            if isinstance(t, nn.Parameter):
                params += tensor_bytes(t)
            else:
                buffers += tensor_bytes(t)
        return params, buffers

    def _record(self, node: torch.fx.Node) -> None:
        training = self.settings.training
        state: list[torch.Tensor] = []
        if node.op == "call_module":
            sub = self.gm.get_submodule(str(node.target))
            state += [*sub.parameters(), *sub.buffers()]
        for inp in node.all_input_nodes:
            if inp.op == "get_attr" and isinstance(self.env[inp], torch.Tensor):
                state.append(self.env[inp])
        isolated = {
            inp: (self.env[inp] if inp.op in ("get_attr", "placeholder") else tree_map(_leaf, self.env[inp]))
            for inp in node.all_input_nodes
        }
        args = torch.fx.node.map_arg(node.args, isolated.__getitem__)
        kwargs = torch.fx.node.map_arg(node.kwargs, isolated.__getitem__)
        saved: list[torch.Tensor] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved.append(t)
            return t

        def call() -> Any:
            return _call(self.gm, node, args, kwargs)

        with flop_counter() as counter, torch.set_grad_enabled(training):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                try:
                    out = call()
                except RuntimeError as exc:
                    if "in-place" not in str(exc) and "leaf Variable" not in str(exc):
                        raise
                    args = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, args)
                    kwargs = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, kwargs)
                    out = call()
        self.env[node] = out
        out_tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not out_tensors:
            return
        fwd_flops = float(counter.get_total_flops())
        target = self.gm.get_submodule(str(node.target)) if node.op == "call_module" else node.target
        closed = operator_closed_form(target, tuple(args), dict(kwargs), out)
        if closed is not None:
            self.closed_form["forward"] += closed.forward
            self.closed_form["backward"] += closed.backward if training else 0.0
            self.closed_form_by_kind[closed.kind] = self.closed_form_by_kind.get(closed.kind, 0.0) + closed.forward
        fwd_time = bwd_time = None
        if self.settings.measure:
            with torch.no_grad():
                fwd_time = median_seconds(call, self.settings.measure_repeats)

        bwd_flops: float | None = 0.0 if training else None
        if training:
            bwd_flops, bwd_time = self._backward(out_tensors, args, kwargs, state)

        saved_bytes = self._saved_bytes(saved)

        op_id = node.name
        in_bytes = 0
        for inp in node.all_input_nodes:
            nbytes = sum(tensor_bytes(t) for t in tree_leaves(self.env[inp]))
            in_bytes += nbytes
            if inp in self.producer:
                self.uses.append(TensorUse(self.producer[inp], op_id, inp.name, nbytes))
        out_bytes = sum(tensor_bytes(t) for t in out_tensors)
        params, buffers = self._state_bytes(state)
        if node.op == "call_module":
            in_bytes += params + buffers
        view = _is_view(node)
        self.producer[node] = op_id
        self.ops.append(
            OpRecord(
                id=op_id,
                op_type=_op_type(node, self.gm),
                module_path=_module_path(node),
                forward_flops=fwd_flops,
                backward_flops=bwd_flops,
                input_bytes=0 if view else in_bytes,
                output_bytes=0 if view else out_bytes,
                param_bytes=params,
                buffer_bytes=buffers,
                saved_bytes=saved_bytes if training else None,
                counted=fwd_flops > 0 or view,
                forward_time_s=fwd_time,
                backward_time_s=bwd_time,
            )
        )

    def _backward(
        self, out_tensors: list[torch.Tensor], args: Any, kwargs: Any, state: list[torch.Tensor]
    ) -> tuple[float, float | None]:
        """The backward FLOPs (and, when measuring, seconds) of an operator: gradients of its outputs for its leaf inputs."""
        bwd_flops = 0.0
        bwd_time = None
        grad_outs = [t for t in out_tensors if t.requires_grad]
        grad_ins = [
            t for t in tree_leaves((args, kwargs, state)) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf
        ]
        grad_ins = list({id(t): t for t in grad_ins}.values())
        if grad_outs and grad_ins:
            seeds = [torch.ones_like(t) for t in grad_outs]

            def backward() -> Any:
                return torch.autograd.grad(grad_outs, grad_ins, seeds, retain_graph=True, allow_unused=True)

            with flop_counter() as bcounter:
                backward()
            bwd_flops = float(bcounter.get_total_flops())
            if self.settings.measure:
                bwd_time = median_seconds(backward, self.settings.measure_repeats)
        elif self.settings.measure:
            bwd_time = 0.0
        return bwd_flops, bwd_time

    def _saved_bytes(self, saved: list[torch.Tensor]) -> int:
        """Bytes of the tensors autograd saved that are neither state nor saved by an earlier operator (kept alive)."""
        saved_bytes = 0
        for t in saved:
            key = _storage_key(t)
            if key in self.state_keys or key in self.seen_saved:
                continue
            self.seen_saved.add(key)
            self.keep_alive.append(t)
            saved_bytes += t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else tensor_bytes(t)
        return saved_bytes


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _call(gm: torch.fx.GraphModule, node: torch.fx.Node, args: Any, kwargs: Any) -> Any:
    if node.op == "call_function":
        target: Any = node.target
        return target(*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], str(node.target))(*args[1:], **kwargs)
    if node.op == "call_module":
        return gm.get_submodule(str(node.target))(*args, **kwargs)
    raise ValueError(f"unexpected FX node kind {node.op!r}")


class _MetaFailed(Exception):
    """Shape-only execution failed (an operator without a meta kernel, a data-dependent branch)."""


def _tied_names(module: nn.Module) -> dict[str, str]:
    """Parameter and buffer names that alias an earlier one (``lm_head.weight`` -> ``transformer.wte.weight``)."""
    first: dict[int, str] = {}
    tied: dict[str, str] = {}
    named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
    for name, tensor in named:
        owner = first.setdefault(id(tensor), name)
        if owner != name:
            tied[name] = owner
    return tied


def _retie(module: nn.Module, tied: Mapping[str, str]) -> None:
    """Make each name of ``tied`` alias its owner again (``Module.to`` to another device unties them)."""
    for name, owner in tied.items():
        mod_name, _, attr = name.rpartition(".")
        own_mod, _, own_attr = owner.rpartition(".")
        target = module.get_submodule(mod_name)
        source = module.get_submodule(own_mod)
        if own_attr in source._parameters:
            target._parameters[attr] = source._parameters[own_attr]
        else:
            target._buffers[attr] = source._buffers[own_attr]


def _without_cache(module: nn.Module) -> str | None:
    """Turn off ``config.use_cache`` of a Hugging Face style model and its parts (on the copy); a note, or ``None``."""
    changed = False
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if config is not None and getattr(config, "use_cache", False):
            config.use_cache = False
            changed = True
    if not changed or not _accepts(module, "use_cache"):  # (an encoder-only model's config may carry the flag unused)
        return None
    return "run with use_cache=False (the key/value cache is an inference-only output; training builds none)"


def _accepts(module: nn.Module, name: str) -> bool:
    """True when ``module.forward`` has a parameter ``name``."""
    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


def _meta_memo(module: nn.Module) -> dict[int, Any]:
    """A ``deepcopy`` memo that maps each parameter and buffer to an empty meta tensor of its shape.

    The copy then allocates no weights (a 7 B-parameter model is not duplicated in memory), and a
    tensor shared by two modules maps to one meta tensor, so ties survive the copy.
    """
    memo: dict[int, Any] = {}
    for t in [*module.parameters(), *module.buffers()]:
        empty = torch.empty_like(t, device="meta")
        memo[id(t)] = nn.Parameter(empty, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) else empty
    return memo


def _prepare(module: nn.Module, device: str, dtype: torch.dtype, name: str) -> tuple[nn.Module, list[str]]:
    """A copy of ``module`` on ``device`` in ``dtype``, eval mode, ties kept, cache off; with notes."""
    tied = _tied_names(module)
    try:
        copied = copy.deepcopy(module, _meta_memo(module) if device == "meta" else None)
        copied.to(device=device, dtype=dtype)
        _retie(copied, tied)
        copied.eval()
    except Exception as exc:
        raise InputError(f"cannot copy the model to {device} {dtype}: {one_line(exc)}", source=name) from None
    notes = ["captured in eval mode (batch norm on running statistics, dropout off)"]
    if tied:
        shown = ", ".join(f"{k} = {v}" for k, v in list(tied.items())[:3]) + (", ..." if len(tied) > 3 else "")
        notes.append(f"{len(tied)} tied parameter(s) counted once, where first used ({shown})")
    cache_note = _without_cache(copied)
    if cache_note:
        notes.append(cache_note)
    return copied, notes


def _to_device(x: Any, device: str, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device)
    return x


def capture_module(
    module: nn.Module,
    inputs: Sequence[Any],
    settings: ImportSettings,
    *,
    name: str = "model",
    tracer: str = "auto",
    kwargs: Mapping[str, Any] | None = None,
) -> CapturedModel:
    """Capture ``module`` on ``inputs`` into operator records (see the module docstring).

    The module is copied (the caller's is left as it was), put in eval mode (batch norm on
    running statistics, dropout off) and cast to ``settings.dtype``.  With
    ``settings.execute_on == "meta"`` (the default without ``measure``) the copy and the inputs
    live on PyTorch's meta device: every count comes from shapes alone, without computing or
    allocating tensors, so a large model imports in seconds.  Where shape-only execution fails,
    the import runs again on the CPU and says so in its notes.

    Parameters
    ----------
    module
        The model.
    inputs
        Example inputs (positional arguments of ``forward``).
    settings
        Import settings (``training``, ``measure``, ``dtype``, ``execute_on``).
    name
        Model name for the graph and messages.
    tracer
        ``"auto"`` (export, else FX), ``"export"`` or ``"fx"``.
    kwargs
        Named inputs of ``forward`` (``attention_mask=...``).

    Raises
    ------
    InputError
        When the inputs do not fit the model, or no tracer captures it.
    """
    dtype = getattr(torch, settings.dtype, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InputError(
            f"must be a floating-point torch dtype such as float32 or bfloat16, got {settings.dtype!r}", where="--dtype"
        )
    if settings.execute_on not in ("meta", "cpu"):
        raise ValueError(f"execute_on must be 'meta' or 'cpu', got {settings.execute_on!r}")
    kwargs = dict(kwargs or {})
    with _no_fused_attention():
        if settings.execute_on == "meta" and not settings.measure:
            try:
                return _capture_on("meta", module, inputs, kwargs, settings, dtype, name, tracer)
            except _MetaFailed as exc:
                if _on_meta(module):  # built without weights (import hf): the CPU has nothing to run it with
                    raise InputError(
                        f"the model was built on the meta device (shapes only, no weights) and does not run on meta "
                        f"tensors: {exc}; import it with 'milp-partition import torch MODULE:FACTORY' from a factory that "
                        "builds it with weights",
                        source=name,
                    ) from None
                captured = _capture_on("cpu", module, inputs, kwargs, settings, dtype, name, tracer)
                note = f"shape-only (meta) execution failed ({exc}); ran on the CPU"
                return replace(captured, notes=(*captured.notes, note))
        return _capture_on("cpu", module, inputs, kwargs, settings, dtype, name, tracer)


def _on_meta(module: nn.Module) -> bool:
    """Whether ``module`` holds a parameter or buffer on the meta device (built without weights)."""
    return any(t.device.type == "meta" for t in [*module.parameters(), *module.buffers()])


def _eager_check(
    module: nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any], training: bool
) -> tuple[list[str], float | None]:
    """Run the eager model once: its custom autograd functions and, if any and ``training``, its eager backward FLOPs."""
    with torch.set_grad_enabled(True):
        out = module(*inputs, **kwargs)
    functions = custom_functions(out)
    if not (functions and training):
        return functions, None
    loss = _loss_of(out)
    if loss is None:
        return functions, None
    with flop_counter() as counter:
        loss.backward()
    for p in module.parameters():
        p.grad = None
    return functions, float(counter.get_total_flops())


def _capture_on(
    device: str,
    module: nn.Module,
    inputs: Sequence[Any],
    kwargs: Mapping[str, Any],
    settings: ImportSettings,
    dtype: torch.dtype,
    name: str,
    tracer: str,
) -> CapturedModel:
    meta = device == "meta"
    module, notes = _prepare(module, device, dtype, name)
    inputs = [_to_device(x, device, dtype) for x in inputs]
    kwargs = {k: _to_device(v, device, dtype) for k, v in kwargs.items()}
    if "use_cache" not in kwargs and _accepts(module, "use_cache") and any("use_cache=False" in n for n in notes):
        kwargs["use_cache"] = False
    functions: list[str] = []
    eager_backward: float | None = None
    eager_error: str | None = None
    if meta:
        try:
            functions, eager_backward = _eager_check(module, inputs, kwargs, settings.training)
        except Exception as exc:  # data-dependent Python code; the tracers may still capture it
            eager_error = one_line(exc, 120)
    try:
        gm, method, capture_notes = capture_graph(module, inputs, tracer, kwargs)
    except InputError:
        if meta:
            raise _MetaFailed(eager_error or "the tracers failed on meta tensors") from None
        _check_inputs_fit(module, inputs, kwargs, name)
        raise
    notes += capture_notes
    recorder = _Recorder(gm, settings)
    try:
        recorder.run(inputs, kwargs)
    except InputError:
        raise
    except Exception as exc:
        if meta:
            raise _MetaFailed(one_line(exc, 120)) from None
        _check_inputs_fit(module, inputs, kwargs, name)
        raise InputError(
            f"the captured graph ({method}) does not run on the example inputs: {one_line(exc)}", source=name
        ) from None
    if meta:
        notes.append("FLOPs and bytes from shapes (meta device)")
        if eager_error:
            notes.append(f"the eager model does not run on meta tensors ({eager_error}); custom autograd functions not checked")
    elif settings.training:
        try:
            functions, eager_backward = _eager_check(module, inputs, kwargs, True)
        except Exception as exc:
            notes.append(f"the eager model failed ({one_line(exc, 120)}); custom autograd functions not checked")
    if functions:
        traced = sum(op.backward_flops or 0.0 for op in recorder.ops)
        notes.append(
            f"custom autograd.Function {', '.join(functions)}: the graph's backward differentiates the traced forward, "
            "not the function's own backward"
            + (
                f" (backward FLOPs: graph {traced:.6g}, eager model with its own backward {eager_backward:.6g})"
                if eager_backward is not None
                else ""
            )
        )
    unknown = sorted({op.op_type for op in recorder.ops if not op.counted})
    total_params = sum(tensor_bytes(p) for p in module.parameters())
    used = sum(op.param_bytes for op in recorder.ops)
    if used != total_params:
        notes.append(f"{total_params - used} parameter bytes are not used by the captured forward")
    reference = {"forward": recorder.closed_form["forward"]}
    if settings.training:
        reference["backward"] = recorder.closed_form["backward"]
    if eager_backward is not None:
        reference["eager_backward"] = eager_backward
    return CapturedModel(
        name=name,
        framework="torch",
        capture=method,
        ops=tuple(recorder.ops),
        uses=tuple(recorder.uses),
        total_param_bytes=total_params,
        reference_flops=reference,
        flops_by_kind=dict(recorder.closed_form_by_kind),
        unknown_ops=tuple(unknown),
        notes=tuple(notes),
    )


def _check_inputs_fit(module: nn.Module, inputs: Sequence[Any], kwargs: Mapping[str, Any], name: str) -> None:
    """Raise a one-line :class:`InputError` when the eager model rejects the inputs (called when capture failed)."""
    try:
        with torch.no_grad():
            module(*inputs, **kwargs)
    except Exception as exc:
        shapes = ", ".join(
            ([f"{k}=" if k else ""][0] + "x".join(map(str, x.shape)))
            for k, x in [*(("", x) for x in inputs), *kwargs.items()]
            if isinstance(x, torch.Tensor)
        )
        raise InputError(f"input shape {shapes} does not fit the model: {one_line(exc)}", source=name, where="--input") from None
