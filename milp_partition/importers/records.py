"""What an importer captures from a model, before it becomes a :class:`~milp_partition.graph.Graph`.

Both importers (PyTorch and ONNX) fill the same plain records, so grouping into
layers, the training graph and the times from a profile are built once
(:mod:`milp_partition.importers.build`).  No framework import here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OpRecord:
    """One captured operator.

    Attributes
    ----------
    id
        Unique id (the FX node name or the ONNX node name).
    op_type
        The operator (``aten.linear.default``, ``Conv``).
    module_path
        Dotted path of the module it came from (``h.3.attn``); ``""`` for the top level.
    forward_flops
        FLOPs of the forward pass (FlopCounterMode's count, or the ONNX formula).
    backward_flops
        FLOPs of the backward pass, or ``None`` when not traced (the builder then applies its ratio).
    input_bytes, output_bytes
        Bytes of the tensors read (activations and parameters) and written.  A view moves no bytes.
    param_bytes
        Bytes of the parameters this operator is the first user of (each parameter counted once).
    buffer_bytes
        Bytes of non-parameter state (batch-norm statistics, constant masks) first used here.
    saved_bytes
        Bytes of activations autograd keeps for the backward pass (each tensor counted once), or
        ``None`` when not traced (the builder then uses ``output_bytes``).
    counted
        True when the FLOP counter (or a formula) knows this operator; False: costed by bytes only.
    forward_time_s, backward_time_s
        Measured times on this machine (``--measure``), else ``None``.
    """

    id: str
    op_type: str
    module_path: str = ""
    forward_flops: float = 0.0
    backward_flops: float | None = None
    input_bytes: int = 0
    output_bytes: int = 0
    param_bytes: int = 0
    buffer_bytes: int = 0
    saved_bytes: int | None = None
    counted: bool = True
    forward_time_s: float | None = None
    backward_time_s: float | None = None


@dataclass(frozen=True)
class TensorUse:
    """A tensor produced by ``source`` and read by ``target`` (both :attr:`OpRecord.id`)."""

    source: str
    target: str
    tensor: str
    bytes: int


@dataclass(frozen=True)
class CapturedModel:
    """Operators in execution order and the tensors between them.

    Attributes
    ----------
    name
        Model name.
    framework
        ``"torch"`` or ``"onnx"``.
    capture
        How the graph was captured: ``"torch.export"``, ``"torch.fx.symbolic_trace"``, ``"onnx"``.
    ops
        Operators in a topological (execution) order.
    uses
        Tensor uses between operators.
    total_param_bytes
        Bytes of all parameters of the model (each counted once).
    reference_flops
        Whole-model FLOPs from a count independent of the importer's counter, for checking
        (PyTorch: the closed forms of :mod:`~milp_partition.importers.closed_form`, ``"forward"``
        and with training ``"backward"``; ``"eager_backward"``: the eager model's backward with its
        custom autograd functions, when it has any); empty if not taken.
    flops_by_kind
        Forward FLOPs split by kind of formula where the importer knows it (ONNX:
        ``"matmul"`` for convolutions and matrix products, ``"other"`` for the rest; PyTorch: the
        closed forms' ``"matmul"``, ``"attention"`` and ``"convolution"``).
    unknown_ops
        Operator types without a FLOP count (costed by bytes), sorted.
    notes
        Free-text notes (fallbacks taken, assumptions).
    module_shapes
        Module path -> shape facts of the layers a tensor-parallel split needs (PyTorch:
        ``Linear`` in/out features, ``Embedding`` sizes, attention heads;
        :func:`~milp_partition.importers.layer_shapes.module_shapes`); empty if not taken.
    batch_size
        Samples in the example input (its first dimension), ``None`` if unknown.
    """

    name: str
    framework: str
    capture: str
    ops: tuple[OpRecord, ...]
    uses: tuple[TensorUse, ...]
    total_param_bytes: int = 0
    reference_flops: dict[str, float] = field(default_factory=dict)
    flops_by_kind: dict[str, float] = field(default_factory=dict)
    unknown_ops: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    module_shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    batch_size: int | None = None
