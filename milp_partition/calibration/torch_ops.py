"""Torch's per-operator costs on this machine: the coefficients of :func:`milp_partition.costmodel.step.operator_s`.

Measured on tiny operators and one matrix product, never on the model: eager dispatch plus autograd's graph
building per forward operator (``o_fwd``), autograd's per-operator backward (``o_bwd``), the matrix rate on the
given threads (``R_mm``) and seconds per byte moved by a copy (``beta_mem``).  Torch is imported inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from milp_partition.calibration.timing import median_seconds


@dataclass(frozen=True)
class OperatorCoefficients:
    """``o_fwd``, ``o_bwd`` (seconds per operator), ``R_mm`` (FLOP/s) and ``beta_mem`` (seconds per byte)."""

    forward_overhead_s: float
    backward_overhead_s: float
    matmul_flops_per_s: float
    memory_s_per_byte: float
    threads: int = 1


def calibrate_operators(threads: int = 1, repeats: int = 7, chain: int = 200, n: int = 256) -> OperatorCoefficients:
    """Measure :class:`OperatorCoefficients` with torch on the CPU (medians of ``repeats``)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x0 = torch.ones(4, requires_grad=True)
        state: dict[str, Any] = {}

        def forward() -> None:
            y = x0
            for _ in range(chain):
                y = y * 1.0001
            state["y"] = y

        def backward() -> None:
            forward()
            state["y"].sum().backward()

        forward()
        backward()
        fwd = median_seconds(forward, repeats) / chain
        both = median_seconds(backward, repeats) / chain
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        mm = median_seconds(lambda: a @ b, repeats)
        big = torch.randn(4 << 20)  # 16 MiB
        out = torch.empty_like(big)
        out.copy_(big)
        copy = median_seconds(lambda: out.copy_(big), repeats)
    finally:
        torch.set_num_threads(previous)
    return OperatorCoefficients(fwd, max(both - fwd, 0.0), 2.0 * n**3 / mm, copy / (2.0 * big.numel() * 4), threads)
