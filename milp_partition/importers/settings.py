"""Settings of a model import (one frozen dataclass, units in the field names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Granularity = Literal["operator", "layer"]


@dataclass(frozen=True)
class ImportSettings:
    """How to turn a model into a graph.

    Attributes
    ----------
    granularity
        ``"operator"``: one node per captured operator.  ``"layer"``: one node per run of
        consecutive operators from the same module, cut at ``layer_depth``.
    layer_depth
        Module-path depth that names a layer (``h.3.attn`` at depth 2 is ``h.3``); shallower
        paths are kept whole.  ``None`` (default): chosen per model by
        :func:`~milp_partition.importers.grouping.choose_layer_depth` (the shallowest depth at
        which no divisible node holds more than ``max_layer_share`` of the forward FLOPs).
    max_layer_share
        Share of the forward FLOPs above which the automatic layer depth splits a node further.
    training
        Build a training graph: a backward node per forward node, tied to it.  With
        ``colocate_backward`` the edge from a node to its own backward carries no bytes (the saved
        activations never leave the device); without, it carries them.
    colocate_backward
        Put each backward node in its forward node's colocation group (a pipeline keeps the
        weights and saved activations where they were made).  False frees them.
    backward_flops_ratio
        Backward FLOPs per forward FLOP where the backward was not traced (ONNX; a PyTorch op
        whose backward could not be run): 2, one product for the input gradient and one for
        the weight gradient.
    backward_bytes_ratio
        Bytes moved by the backward pass per forward byte moved (gradients in and out beside
        the saved activations): 2.
    optimizer_state_bytes_per_param_byte
        Resident bytes beyond the weights, per parameter byte, in a training graph: gradients
        plus optimizer state (1 gradient + 2 Adam moments = 3; SGD with momentum = 2).  Added to
        the forward node's ``other_bytes``.  Solve such a graph with ``--memory-model static``
        or with ``--optimizer-factor 1``, so it is not counted twice.
    dtype
        Floating-point dtype of the model (``float32``, ``bfloat16``, ``float16``), also the
        profile's compute rate to use.
    profile
        Device profile for times: a datasheet name (``H100``) or a profile JSON path; ``None``
        leaves modelled times at zero unless ``measure``.  Default: the H100 datasheet.
    measure
        Time each operator on this machine's CPU instead (PyTorch only; implies ``execute_on="cpu"``).
    execute_on
        Where the PyTorch importer runs the model to count: ``"meta"`` (shapes only, no compute
        or memory; falls back to the CPU where an operator has no meta kernel) or ``"cpu"``.
    measure_repeats
        Timed repetitions per operator (the median is kept).
    edge_times
        Give each edge a transfer time from the profile's device-to-device link; False leaves it
        to the cluster's link at solve time.
    time_unit
        Time unit of the graph written (``"ms"``).
    """

    granularity: Granularity = "operator"
    layer_depth: int | None = None
    max_layer_share: float = 0.25
    training: bool = False
    colocate_backward: bool = True
    backward_flops_ratio: float = 2.0
    backward_bytes_ratio: float = 2.0
    optimizer_state_bytes_per_param_byte: float = 3.0
    dtype: str = "float32"
    profile: str | None = "H100"
    measure: bool = False
    execute_on: Literal["meta", "cpu"] = "meta"
    measure_repeats: int = 3
    edge_times: bool = True
    time_unit: str = "ms"
