"""An independent check of the PyTorch importer's FLOPs: closed-form counts from operand shapes.

The importer counts FLOPs with ``FlopCounterMode`` (:mod:`.flop_formulas`).  This module counts
the operators that carry nearly all of a network's FLOPs again, with its own formulas and no code
of the counter's, so the two can disagree (an operator the counter does not know, a wrong
formula, a kernel it misses on one execution path).  Counted per captured operator, from the
shapes of its operands as they ran, 2 FLOPs per multiply-add:

matrix products (``linear``, ``addmm``, ``mm``, ``bmm``, ``baddbmm``, ``matmul``, ``nn.Linear``)
    .. math:: F = 2 \\cdot \\text{numel}(\\text{output}) \\cdot K

    with :math:`K` the contracted dimension.  Backward: :math:`F` per matrix operand that
    needs a gradient (input gradient, weight gradient).
attention (``scaled_dot_product_attention`` and its fused kernels)
    .. math:: F = 2 \\, B H_q S_q S_k (D_q + D_v)

    (:math:`QK^T` and :math:`PV`; no discount for a causal mask).  Backward: :math:`2F`
    (:math:`dV, dP, dQ, dK`) when any of :math:`Q, K, V` needs a gradient.
convolutions (``convolution``, ``conv{1,2,3}d``, ``conv_transpose{1,2,3}d``, ``nn.Conv*``)
    .. math:: F = 2 \\, N \\prod(\\text{spatial}) \\, C_{out} \\, \\frac{C_{in}}{g} \\prod(\\text{kernel})

    (spatial size of the output; of the input for a transposed convolution).  Backward:
    :math:`F` for the input gradient plus :math:`F` for the weight gradient, each when needed.

Elementwise operators, normalizations and reductions are not counted (nor are they by the
counter), so the two totals should agree to well under 1% on networks built from these layers.

Needs PyTorch.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

aten = torch.ops.aten

_MATMUL_PACKETS = ("linear", "addmm", "mm", "bmm", "baddbmm", "matmul")
_CONV_PACKETS = ("convolution", "_convolution", "conv1d", "conv2d", "conv3d")
_CONV_T_PACKETS = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
_ATTENTION_PACKETS = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
)
_PY_MATMUL = (F.linear, torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, operator.matmul)
_PY_CONV = (F.conv1d, F.conv2d, F.conv3d)
_PY_CONV_T = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)


@dataclass(frozen=True)
class ClosedForm:
    """Closed-form FLOPs of one operator: its kind (``matmul``, ``attention``, ``convolution``), forward and backward."""

    kind: str
    forward: float
    backward: float


def _needs_grad(x: Any) -> int:
    return int(isinstance(x, torch.Tensor) and x.requires_grad)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _matmul(a: Any, b: Any, out: Any) -> ClosedForm | None:
    if not all(isinstance(t, torch.Tensor) for t in (a, b, out)):
        return None
    k = _shape(a)[-1]
    fwd = 2.0 * out.numel() * k
    return ClosedForm("matmul", fwd, fwd * (_needs_grad(a) + _needs_grad(b)))


def _linear(x: Any, w: Any) -> ClosedForm | None:
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        return None
    out_features, in_features = _shape(w)
    rows = x.numel() // max(in_features, 1)
    fwd = 2.0 * rows * in_features * out_features
    return ClosedForm("matmul", fwd, fwd * (_needs_grad(x) + _needs_grad(w)))


def _conv(x: Any, w: Any, out: Any, transposed: bool) -> ClosedForm | None:
    if not all(isinstance(t, torch.Tensor) for t in (x, w, out)):
        return None
    xs, ws, os_ = _shape(x), _shape(w), _shape(out)
    if len(xs) == len(ws) - 1:  # unbatched input
        xs, os_ = (1, *xs), (1, *os_)
    spatial = xs[2:] if transposed else os_[2:]
    fwd = 2.0 * xs[0] * math.prod(spatial) * ws[0] * ws[1] * math.prod(ws[2:])
    return ClosedForm("convolution", fwd, fwd * (_needs_grad(x) + _needs_grad(w)))


def _attention(q: Any, k: Any, v: Any) -> ClosedForm | None:
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return None
    qs = _shape(q)
    fwd = 2.0 * math.prod(qs[:-2]) * qs[-2] * _shape(k)[-2] * (qs[-1] + _shape(v)[-1])
    any_grad = _needs_grad(q) or _needs_grad(k) or _needs_grad(v)
    return ClosedForm("attention", fwd, 2 * fwd if any_grad else 0.0)


def operator_closed_form(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> ClosedForm | None:
    """Closed-form FLOPs of one call ``target(*args, **kwargs) -> out``, or ``None`` if not of a counted kind.

    ``target`` is an ATen operator overload (``aten.linear.default``), a Python function of the
    torch API (an FX ``call_function``) or a module (an FX ``call_module``).
    """
    if isinstance(target, torch._ops.OpOverload):
        name = target._overloadpacket.__name__
        if name == "linear":
            return _linear(args[0], args[1])
        if name in ("addmm", "baddbmm"):
            return _matmul(args[1], args[2], out)
        if name in _MATMUL_PACKETS:
            return _matmul(args[0], args[1], out)
        if name in _CONV_PACKETS:
            transposed = bool(args[6]) if name in ("convolution", "_convolution") and len(args) > 6 else False
            return _conv(args[0], args[1], out, transposed)
        if name in _CONV_T_PACKETS:
            return _conv(args[0], args[1], out, True)
        if name in _ATTENTION_PACKETS:
            first = out[0] if isinstance(out, tuple) else out
            return _attention(args[0], args[1], args[2]) if isinstance(first, torch.Tensor) else None
        return None
    if isinstance(target, nn.Linear):
        return _linear(args[0], target.weight)
    if isinstance(target, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        return _conv(args[0], target.weight, out, False)
    if isinstance(target, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        return _conv(args[0], target.weight, out, True)
    if target is F.linear:
        return _linear(args[0], args[1] if len(args) > 1 else kwargs.get("weight"))
    if target in (torch.addmm, torch.baddbmm):
        return _matmul(args[1], args[2], out)
    if target in _PY_MATMUL:
        return _matmul(args[0], args[1], out)
    if target in _PY_CONV:
        return _conv(args[0], args[1] if len(args) > 1 else kwargs.get("weight"), out, False)
    if target in _PY_CONV_T:
        return _conv(args[0], args[1] if len(args) > 1 else kwargs.get("weight"), out, True)
    if target is F.scaled_dot_product_attention:
        return _attention(*(list(args[:3]) + [kwargs.get(n) for n in ("query", "key", "value")][len(args[:3]) :]))
    return None
