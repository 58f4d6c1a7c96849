"""The memory upper bound of one rank of a stage (see :mod:`milp_partition.costmodel`): plain data and arithmetic."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryCoefficients:
    """How a device holds a stage's tensors.

    Attributes
    ----------
    optimizer_state_bytes_per_param_byte
        ``k_opt``: optimizer state per parameter byte (Adam: 2; SGD with momentum: 1; plain SGD: 0).
    rounding_bytes
        The allocator's block: every tensor rounded up to it (CUDA caching allocator: 512; CPU: 0).
    transient_factor
        Multiplier on the backward's largest transient (a layer's activations' gradients); 1 unless calibrated.
    workspace_bytes
        A fixed per-rank workspace (cuBLAS and the like; 0 on the CPU).
    first_stage_extra_microbatches
        Micro-batches of saved activations the first stage holds beyond 1F1B's ``min(m, p)``.  Measured on this CPU
        with torch's ``Schedule1F1B`` (run.json's saved-activation peak, GPT-small test, global batch 8): 2.89
        micro-batches at the first of 2 stages (1F1B: 2), 2.00 on one stage with 4 per replica (1F1B: 1), 1.00 at the
        last of 2 stages (1F1B: 1); so 1 (an upper bound on what was measured).
    """

    optimizer_state_bytes_per_param_byte: float = 2.0
    rounding_bytes: int = 0
    transient_factor: float = 1.0
    workspace_bytes: float = 0.0
    first_stage_extra_microbatches: int = 1


@dataclass(frozen=True)
class StageMemory:
    """One rank's bytes by term; :attr:`total_bytes` is their sum."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    buffers_bytes: float
    activations_bytes: float
    temporaries_bytes: float
    rounding_bytes: float
    workspace_bytes: float
    batch_inputs_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return math.fsum(
            (
                self.weights_bytes,
                self.gradients_bytes,
                self.optimizer_bytes,
                self.buffers_bytes,
                self.activations_bytes,
                self.temporaries_bytes,
                self.rounding_bytes,
                self.workspace_bytes,
                self.batch_inputs_bytes,
            )
        )


def stage_memory(
    param_bytes: float,
    buffer_bytes: float,
    kept_bytes_per_sample: float,
    largest_recomputed_bytes_per_sample: float,
    largest_transient_bytes_per_sample: float,
    microbatch_size: int,
    in_flight: int,
    tensors: int,
    coeffs: MemoryCoefficients,
    batch_inputs_bytes: float = 0.0,
) -> StageMemory:
    """The terms of :mod:`milp_partition.costmodel`'s memory bound for one rank.

    ``kept_bytes_per_sample``: the saved activations of the stage for one sample (a recomputed layer: its input);
    ``largest_recomputed_bytes_per_sample``: the largest recomputed layer's saved activations (re-run one at a
    time); ``largest_transient_bytes_per_sample``: the largest layer's saved activations (their gradients in the
    backward); ``tensors``: how many tensors the rank holds (for the allocator's rounding);
    ``batch_inputs_bytes``: the model's inputs the first stage keeps beyond its micro-batches in flight (``run`` hands
    it views of the global batch, so autograd's saved input holds the whole batch's storage, two steps' at once).
    """
    b = float(microbatch_size)
    return StageMemory(
        weights_bytes=param_bytes,
        gradients_bytes=param_bytes,
        optimizer_bytes=coeffs.optimizer_state_bytes_per_param_byte * param_bytes,
        buffers_bytes=buffer_bytes,
        activations_bytes=in_flight * b * kept_bytes_per_sample,
        temporaries_bytes=b
        * (largest_recomputed_bytes_per_sample + coeffs.transient_factor * largest_transient_bytes_per_sample),
        rounding_bytes=float(tensors * coeffs.rounding_bytes),
        workspace_bytes=coeffs.workspace_bytes,
        batch_inputs_bytes=batch_inputs_bytes,
    )
