"""The FLOP counter of the PyTorch importer: ``FlopCounterMode`` with corrected and added formulas.

``torch.utils.flop_counter.FlopCounterMode`` counts matrix products, convolutions and attention
from shapes.  Two of its gaps change the graphs this project plans on, so this module passes it
formulas of its own (``custom_mapping``):

Convolution backward (``aten.convolution_backward``)
    Torch's formula counts the weight gradient over all ``C_in * C_out`` channel pairs, ``groups``
    times too many for a grouped convolution (a depthwise one: ``C_in`` times).  Here each
    gradient asked for by ``output_mask`` costs what the forward convolution costs,

    .. math:: F = 2 \\, N \\, \\prod(\\text{spatial}) \\, w_0 \\, w_1 \\prod(\\text{kernel}),

    with ``w = (C_out, C_in / groups, *kernel)`` the weight's shape and the spatial size that of
    the output (of the input for a transposed convolution): the input gradient is the transposed
    convolution of the output gradient, the weight gradient the correlation of input and output
    gradient, each with the same multiply-adds per group as the forward pass.

Attention on the CPU (``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward)
    ``scaled_dot_product_attention`` dispatches on the CPU to a fused kernel that torch's table
    lacks (counted 0).  Forward: the two products :math:`QK^T` and :math:`PV`,
    :math:`2 B H_q S_q S_k (D_q + D_v)` (grouped-query attention: the key/value heads are
    broadcast to the query heads); backward: the four products for :math:`dV, dP, dQ, dK`,
    twice the forward.  Causal masking is not discounted, as in torch's formulas for the other
    attention kernels, so the CPU, meta and GPU paths agree.

Needs PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten


def conv_forward_flops(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int], transposed: bool) -> int:
    """Multiply-add FLOPs (2 per MAC) of one convolution from its input, weight and output shapes."""
    spatial = (x_shape if transposed else out_shape)[2:]
    return 2 * int(x_shape[0]) * math.prod(spatial) * int(w_shape[0]) * int(w_shape[1]) * math.prod(w_shape[2:])


def attention_forward_flops(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int]) -> int:
    """FLOPs of :math:`QK^T` and :math:`PV` for ``(B, H, S, D)`` query, key and value shapes (any leading dims)."""
    *lead, s_q, d_q = q_shape
    s_k = k_shape[-2]
    d_v = v_shape[-1]
    return 2 * math.prod(lead) * s_q * s_k * (d_q + d_v)


def _conv_backward(
    grad_out_shape: Sequence[int],
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: Any,
    output_mask: Sequence[bool],
    out_shape: Any = None,
    **_kwargs: Any,
) -> int:
    forward = conv_forward_flops(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _cpu_attention(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int], *_args: Any, **_kwargs: Any) -> int:
    return attention_forward_flops(q_shape, k_shape, v_shape)


def _cpu_attention_backward(
    _grad_out_shape: Sequence[int],
    q_shape: Sequence[int],
    k_shape: Sequence[int],
    v_shape: Sequence[int],
    *_args: Any,
    **_kwargs: Any,
) -> int:
    return 2 * attention_forward_flops(q_shape, k_shape, v_shape)


def custom_formulas() -> Mapping[Any, Any]:
    """The formulas this module adds to or corrects in torch's table (operator packet -> shape formula)."""
    formulas: dict[Any, Any] = {aten.convolution_backward: _conv_backward}
    for name, fn in (
        ("_scaled_dot_product_flash_attention_for_cpu", _cpu_attention),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_attention_backward),
        ("_scaled_dot_product_fused_attention_overrideable", _cpu_attention),
        ("_scaled_dot_product_fused_attention_overrideable_backward", _cpu_attention_backward),
    ):
        packet = getattr(aten, name, None)
        if packet is not None:
            formulas[packet] = fn
    return formulas


def flop_counter() -> FlopCounterMode:
    """A silent ``FlopCounterMode`` with :func:`custom_formulas`."""
    return FlopCounterMode(display=False, custom_mapping=dict(custom_formulas()))
