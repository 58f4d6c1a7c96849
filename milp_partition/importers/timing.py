"""Operator times from a device profile (FLOPs and bytes moved) or from measurements.

The profile is :class:`milp_partition.calibration.profile.DeviceProfile`, named by a datasheet
name (``H100``) or a profile JSON path (:func:`~milp_partition.calibration.profile.resolve_profile`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from milp_partition.calibration.profile import resolve_profile
from milp_partition.errors import InputError
from milp_partition.importers.records import OpRecord
from milp_partition.importers.settings import ImportSettings


@dataclass(frozen=True)
class OpTimes:
    """Seconds of one operator's forward and backward pass."""

    forward_s: float
    backward_s: float


def load_profile_spec(spec: str) -> Any:
    """The :class:`DeviceProfile` named by ``spec`` (datasheet name or JSON path).

    Raises
    ------
    InputError
        When the name or file is not a profile.
    """

    try:
        return resolve_profile(spec)
    except InputError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"not a device profile: {exc}", where="--profile", source=spec) from None


def op_times(op: OpRecord, settings: ImportSettings, profile: Any | None) -> OpTimes:
    """Forward and backward seconds of ``op``.

    Measured times win when ``settings.measure``.  Otherwise, with a profile, each pass is one
    kernel: ``profile.compute_time_s(flops, bytes_moved, dtype)`` with bytes moved = input plus
    output bytes forward and ``backward_bytes_ratio`` times that backward, and backward FLOPs
    traced or ``backward_flops_ratio`` times forward.  Without either, zero.
    """
    bwd_flops = backward_flops(op, settings)
    if settings.measure and op.forward_time_s is not None:
        bwd = op.backward_time_s if op.backward_time_s is not None else 0.0
        return OpTimes(op.forward_time_s, bwd if settings.training else 0.0)
    if profile is None:
        return OpTimes(0.0, 0.0)
    moved = op.input_bytes + op.output_bytes
    fwd = profile.compute_time_s(op.forward_flops, moved, settings.dtype) if (op.forward_flops or moved) else 0.0
    bwd = 0.0
    if settings.training:
        bwd_moved = settings.backward_bytes_ratio * moved
        bwd = profile.compute_time_s(bwd_flops, bwd_moved, settings.dtype) if (bwd_flops or bwd_moved) else 0.0
    return OpTimes(fwd, bwd)


def backward_flops(op: OpRecord, settings: ImportSettings) -> float:
    """Traced backward FLOPs, else ``backward_flops_ratio`` times the forward FLOPs."""
    if op.backward_flops is not None:
        return op.backward_flops
    return settings.backward_flops_ratio * op.forward_flops
