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
* with ``measure``, the median wall time of its forward and backward on this CPU.

Operators the counter does not know (elementwise, normalizations, copies) get zero FLOPs and
are costed by the bytes they move; a view (an output that aliases an input) moves no bytes.
The whole-model count of ``FlopCounterMode`` on the eager module is kept for checking.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import operator
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.flop_counter import FlopCounterMode

from milp_partition.errors import InputError
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


def reference_flops(module: nn.Module, inputs: Sequence[Any], training: bool) -> dict[str, float]:
    """Whole-model FLOPs from ``FlopCounterMode`` on the eager module: ``forward`` (and ``backward``)."""
    with FlopCounterMode(display=False) as fwd, torch.set_grad_enabled(training):
        out = module(*inputs)
    result = {"forward": float(fwd.get_total_flops())}
    if training:
        loss = sum(t.float().sum() for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad)
        if isinstance(loss, torch.Tensor):
            with FlopCounterMode(display=False) as bwd:
                loss.backward()
            result["backward"] = float(bwd.get_total_flops())
        for p in module.parameters():
            p.grad = None
    return result


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


def capture_graph(module: nn.Module, inputs: Sequence[Any], tracer: str = "auto") -> tuple[torch.fx.GraphModule, str, list[str]]:
    """Capture ``module`` as an FX graph module.

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
                program = torch.export.export(module, tuple(inputs))
            return program.module(), "torch.export", notes
        except Exception as exc:
            errors.append(f"torch.export failed: {one_line(exc)}")
    if tracer in ("auto", "fx"):
        try:
            with _quiet_tracers():
                gm = torch.fx.symbolic_trace(module)
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


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


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

    def run(self, inputs: Sequence[Any]) -> None:
        placeholders = iter(inputs)
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = next(placeholders)
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

        with FlopCounterMode(display=False) as counter, torch.set_grad_enabled(training):
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
        fwd_time = bwd_time = None
        if self.settings.measure:
            with torch.no_grad():
                fwd_time = _median_time(call, self.settings.measure_repeats)

        bwd_flops: float | None = 0.0 if training else None
        if training:
            grad_outs = [t for t in out_tensors if t.requires_grad]
            grad_ins = [
                t for t in tree_leaves((args, kwargs, state)) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf
            ]
            grad_ins = list({id(t): t for t in grad_ins}.values())
            if grad_outs and grad_ins:
                seeds = [torch.ones_like(t) for t in grad_outs]

                def backward() -> Any:
                    return torch.autograd.grad(grad_outs, grad_ins, seeds, retain_graph=True, allow_unused=True)

                with FlopCounterMode(display=False) as bcounter:
                    backward()
                bwd_flops = float(bcounter.get_total_flops())
                if self.settings.measure:
                    bwd_time = _median_time(backward, self.settings.measure_repeats)
            elif self.settings.measure:
                bwd_time = 0.0

        saved_bytes = 0
        for t in saved:
            key = _storage_key(t)
            if key in self.state_keys or key in self.seen_saved:
                continue
            self.seen_saved.add(key)
            self.keep_alive.append(t)
            saved_bytes += t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else tensor_bytes(t)

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


def capture_module(
    module: nn.Module, inputs: Sequence[Any], settings: ImportSettings, *, name: str = "model", tracer: str = "auto"
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
    if settings.execute_on == "meta" and not settings.measure:
        try:
            return _capture_on("meta", module, inputs, settings, dtype, name, tracer)
        except _MetaFailed as exc:
            captured = _capture_on("cpu", module, inputs, settings, dtype, name, tracer)
            note = f"shape-only (meta) execution failed ({exc}); ran on the CPU"
            return replace(captured, notes=(*captured.notes, note))
    return _capture_on("cpu", module, inputs, settings, dtype, name, tracer)


def _capture_on(
    device: str,
    module: nn.Module,
    inputs: Sequence[Any],
    settings: ImportSettings,
    dtype: torch.dtype,
    name: str,
    tracer: str,
) -> CapturedModel:
    meta = device == "meta"
    try:
        module = copy.deepcopy(module).to(device=device, dtype=dtype).eval()
    except Exception as exc:
        raise InputError(f"cannot copy the model to {device} {dtype}: {one_line(exc)}", source=name) from None
    inputs = [
        (x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device)) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]
    try:
        reference = reference_flops(module, inputs, settings.training)
    except Exception as exc:
        if meta:
            raise _MetaFailed(one_line(exc, 120)) from None
        shapes = ", ".join("x".join(map(str, x.shape)) for x in inputs if isinstance(x, torch.Tensor))
        raise InputError(
            f"input shape {shapes} does not fit the model: {one_line(exc)}", source=name, where="--input-shape"
        ) from None
    gm, method, notes = capture_graph(module, inputs, tracer)
    notes.append("captured in eval mode (batch norm on running statistics, dropout off)")
    if meta:
        notes.append("FLOPs and bytes from shapes (meta device)")
    recorder = _Recorder(gm, settings)
    try:
        recorder.run(inputs)
    except InputError:
        raise
    except Exception as exc:
        if meta:
            raise _MetaFailed(one_line(exc, 120)) from None
        raise InputError(
            f"the captured graph ({method}) does not run on the example inputs: {one_line(exc)}", source=name
        ) from None
    unknown = sorted({op.op_type for op in recorder.ops if not op.counted})
    total_params = sum(tensor_bytes(p) for p in module.parameters())
    used = sum(op.param_bytes for op in recorder.ops)
    if used != total_params:
        notes.append(f"{total_params - used} parameter bytes are not used by the captured forward")
    return CapturedModel(
        name=name,
        framework="torch",
        capture=method,
        ops=tuple(recorder.ops),
        uses=tuple(recorder.uses),
        total_param_bytes=total_params,
        reference_flops=reference,
        unknown_ops=tuple(unknown),
        notes=tuple(notes),
    )
