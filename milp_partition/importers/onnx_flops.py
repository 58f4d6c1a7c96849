"""FLOP formulas for ONNX operators, from input and output shapes.

Conventions (those of :class:`torch.utils.flop_counter.FlopCounterMode` for products, so the
two importers agree on them):

===============================  ==========================================================
operator                         forward FLOPs
===============================  ==========================================================
Conv, ConvTranspose              ``2 * prod(output) * (C_in / groups) * prod(kernel)``
                                 (transposed: over the input's spatial size); bias is
                                 ``prod(output)`` more, kind ``other``
Gemm                             ``2 * M * N * K``; with C, ``M * N`` more (``other``)
MatMul, MatMulInteger            ``2 * prod(batch) * M * N * K`` (broadcast batch)
Attention (ONNX 23),             ``4 * B * H * S_q * S_kv * D`` for the two products,
com.microsoft Attention /        plus 5 per score for the softmax (``other``)
MultiHeadAttention
Softmax, LogSoftmax              5 per element (max, subtract, exp, sum, divide)
LayerNormalization, Group-,      7 per element (mean, subtract, square, mean, rsqrt scale,
InstanceNormalization,           affine scale and shift)
SkipLayerNormalization,
RMSNormalization,
SimplifiedLayerNormalization
BatchNormalization               2 per element (inference: scale and shift)
elementwise arithmetic and       1 per output element
activations (Add, Mul, Relu,
Gelu, Erf, Sigmoid, Where, ...)
MaxPool, AveragePool, LpPool     ``prod(output) * prod(kernel)``
GlobalAverage/MaxPool,           1 per input element
ReduceMean/Sum/Max/...
data movement (Reshape,          0 (costed by bytes moved; Reshape, Flatten, Squeeze,
Transpose, Concat, Gather, ...)  Unsqueeze and Identity are views and move none)
===============================  ==========================================================

An operator in none of these lists is *unknown*: it gets no FLOPs, is costed by bytes, and
is listed by the importer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Shape = tuple[int, ...] | None

ELEMENTWISE: frozenset[str] = frozenset(
    "Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Relu LeakyRelu PRelu Elu Selu Celu Sigmoid HardSigmoid "
    "HardSwish Tanh Erf Gelu FastGelu BiasGelu QuickGelu Mish Softplus Softsign Clip Min Max Mean Sum Where Not And "
    "Or Xor Equal Less Greater LessOrEqual GreaterOrEqual Sin Cos Floor Ceil Round Sign IsNaN IsInf Mod Dropout "
    "ThresholdedRelu Shrink Swish SiLU".split()
)
NORMALIZATION_7: frozenset[str] = frozenset(
    "LayerNormalization GroupNormalization InstanceNormalization SkipLayerNormalization RMSNormalization "
    "SimplifiedLayerNormalization SkipSimplifiedLayerNormalization MeanVarianceNormalization".split()
)
REDUCTIONS: frozenset[str] = frozenset(
    "GlobalAveragePool GlobalMaxPool GlobalLpPool ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 "
    "ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin CumSum".split()
)
VIEWS: frozenset[str] = frozenset("Reshape Flatten Squeeze Unsqueeze Identity".split())
DATA_MOVEMENT: frozenset[str] = frozenset(
    "Transpose Concat Split Slice Gather GatherElements GatherND Scatter ScatterElements ScatterND Cast CastLike "
    "Expand Tile Pad Shape Size Constant ConstantOfShape Range Resize Upsample DepthToSpace SpaceToDepth OneHot "
    "NonZero TopK Trilu EyeLike Compress ReverseSequence".split()
)
POOLS: frozenset[str] = frozenset("MaxPool AveragePool LpPool".split())
ATTENTION: frozenset[str] = frozenset("Attention MultiHeadAttention GroupQueryAttention".split())


def numel(shape: Shape) -> int:
    """Elements of a shape (0 when unknown)."""
    return 0 if shape is None else math.prod(shape)


def known_op(op_type: str) -> bool:
    """Whether :func:`op_flops` has a formula (or a known zero) for ``op_type``."""
    return op_type in (
        ELEMENTWISE
        | NORMALIZATION_7
        | REDUCTIONS
        | VIEWS
        | DATA_MOVEMENT
        | POOLS
        | ATTENTION
        | {"Conv", "ConvTranspose", "Gemm", "MatMul", "MatMulInteger", "Softmax", "LogSoftmax", "BatchNormalization"}
    )


def op_flops(op_type: str, inputs: Sequence[Shape], outputs: Sequence[Shape], attrs: Mapping[str, Any]) -> tuple[float, float]:
    """Forward FLOPs of one operator as ``(matmul, other)``: products and convolutions, and the rest.

    Parameters
    ----------
    op_type
        The ONNX operator type.
    inputs, outputs
        Their shapes (``None`` where shape inference did not give one; the formula then yields 0).
    attrs
        The node's attributes (``group``, ``kernel_shape``, ``transA``, ``transB``, ``num_heads``).
    """
    out = outputs[0] if outputs else None
    n_out = numel(out)
    if op_type in ("Conv", "ConvTranspose"):
        x, w = inputs[0], inputs[1] if len(inputs) > 1 else None
        if x is None or w is None or out is None:
            return 0.0, 0.0
        spatial = x[2:] if op_type == "ConvTranspose" else out[2:]
        c_in_per_group = w[1] if op_type == "Conv" else w[0] // int(attrs.get("group", 1) or 1)
        c_out = out[1]
        products = 2.0 * x[0] * math.prod(spatial) * c_out * c_in_per_group * math.prod(w[2:])
        bias = float(n_out) if len(inputs) > 2 and inputs[2] is not None else 0.0
        return products, bias
    if op_type == "Gemm":
        a, b = inputs[0], inputs[1]
        if a is None or b is None:
            return 0.0, 0.0
        m, k = (a[1], a[0]) if attrs.get("transA") else (a[0], a[1])
        n = b[0] if attrs.get("transB") else b[1]
        bias = float(m * n) if len(inputs) > 2 and inputs[2] is not None else 0.0
        return 2.0 * m * n * k, bias
    if op_type in ("MatMul", "MatMulInteger"):
        a, b = inputs[0], inputs[1]
        if a is None or b is None or out is None:
            return 0.0, 0.0
        k = a[-1]
        return 2.0 * numel(out) * k, 0.0
    if op_type in ATTENTION:
        return _attention(op_type, inputs, attrs)
    if op_type in ("Softmax", "LogSoftmax"):
        return 0.0, 5.0 * n_out
    if op_type in NORMALIZATION_7:
        return 0.0, 7.0 * n_out
    if op_type == "BatchNormalization":
        return 0.0, 2.0 * n_out
    if op_type in ELEMENTWISE:
        return 0.0, float(n_out)
    if op_type in POOLS:
        kernel = attrs.get("kernel_shape") or ()
        return 0.0, float(n_out * math.prod(kernel))
    if op_type in REDUCTIONS:
        return 0.0, float(numel(inputs[0]) if inputs else 0)
    return 0.0, 0.0


def _attention(op_type: str, inputs: Sequence[Shape], attrs: Mapping[str, Any]) -> tuple[float, float]:
    """Products and softmax of a fused attention operator (query, key, value layouts as ONNX gives them)."""
    q = inputs[0] if inputs else None
    if q is None:
        return 0.0, 0.0
    if op_type == "Attention" and len(q) == 4:  # ONNX opset 23: (B, H, S, D)
        key = inputs[1] if len(inputs) > 1 and inputs[1] is not None else q
        b, h, s_q, d = q
        s_kv = key[2]
    else:  # com.microsoft: (B, S, hidden); Attention packs q, k, v in the weights
        heads = int(attrs.get("num_heads", 1) or 1)
        b, s_q = q[0], q[1]
        kv = inputs[1] if op_type != "Attention" and len(inputs) > 1 else None
        s_kv = kv[1] if kv is not None and len(kv) == 3 else s_q
        weights = inputs[1] if op_type == "Attention" and len(inputs) > 1 else None
        if weights is not None:
            hidden = weights[1] // 3
            projections = 2.0 * b * s_q * q[2] * weights[1]
        else:
            hidden = q[2]
            projections = 0.0
        h, d = heads, hidden // heads
        return projections + 4.0 * b * h * s_q * s_kv * d, 5.0 * b * h * s_q * s_kv
    return 4.0 * b * h * s_q * s_kv * d, 5.0 * b * h * s_q * s_kv
