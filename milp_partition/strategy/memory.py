"""Per-configuration memory of PaSE layers, derived from their iteration domains.

PaSE's tables carry no memory.  This module derives an **approximate**
per-device memory for every configuration from the layer's name alone, such as
``Conv(dom=128x3x55x55x11x11x96)`` (the op type and the length of each
iteration-domain dimension, in PaSE's order) and the configuration, such as
``1x1x1x1x1x1x2`` (the split factor of each domain dimension), so that a
memory-limited variant of the PaSE problems can be built.  It is a model, not a
measurement: it counts the layer's parameters and the one output activation the
layer keeps for the backward pass; it leaves out workspace, temporaries,
framework overhead and PaSE's ghost or re-distribution buffers.

Notes
-----
A tensor whose dimension i has length ``d_i`` and is divided by the split factor
``f_i`` of the domain dimension it follows occupies, per device,
``E = prod_i ceil(d_i / f_i)`` elements (dimensions of a tensor that are not
domain dimensions are never split).  For a configuration, per device::

    memory_bytes = ceil(bytes_per_element * (optimizer_state_factor * W + A))

where ``W`` sums ``E`` over the layer's parameter tensors and ``A`` is ``E`` of
its output activation (``0`` with ``keep_activations=False``).

Per op type (domain dimensions as PaSE's ``nn_ops.py`` lays them out; ``x``
multiplies lengths; "domain" means all domain dimensions):

==========================  ====================================  ======================  ==========================
op type                     domain                                parameters (W)          output activation (A)
==========================  ====================================  ======================  ==========================
``Conv``                    (b, c, h, w, r, s, n); output h x w,  c x r x s x n           b x n x h x w
                            kernel r x s, n filters
``FC``                      (b..., n_out, n_in)                   n_in x n_out            b... x n_out
``Einsum`` rank 4           (b, l, n, k): ``blk,kn->bln``         k x n                   b x l x n
                            (projection; the embedding as a
                            one-hot product)
``Einsum`` rank 6           (s, b, h, l, k, e):                   s x h x e x k           s x b x h x l x k
                            ``sble,shek->sbhlk``, stacked
                            Q/K/V projection, e = h*k
``Einsum`` rank 5 (proj.)   (b, l, e, h, k): ``bhlk,hek->ble``,   h x e x k               b x l x e
                            e = h*k
``Einsum`` rank 5 (attn.)   (b, h, l, m, k) or (b, h, l, k, m),   none                    first four domain dims
                            l == m
``LSTM``                    (L, S, B, n, k): layers, sequence,    8 x L x n x k (4        6 x L x S x B x n (4
                            batch, units, units                   gates; input and        gates, cell and hidden
                                                                  recurrent weights)      state, every layer/step)
``Norm`` rank 4             (b, c, h, w): batch norm              2 x c (scale, bias)     domain
``Norm`` rank 2 or 3        (b..., e): layer norm                 2 x e (scale, bias)     domain
``Pooling``                 (b, c, h, w), output h x w            none                    domain
``Elementwise``             the tensor's shape                    none                    domain
``Softmax``                 the tensor's shape                    none                    domain
``SoftmaxCrossEntropy``     (b..., classes)                       none                    domain
``Ravel``, ``Unravel``      the multi-dimensional shape / the     none                    domain
                            flat shape
``ReduceMean`` rank 4       (b, c, h, w), mean over h and w       none                    b x c
``Concat``                  the input shape with 1 at the         none                    domain, the axis the sum
                            concatenation axis                                            of the inputs' lengths
``Unstack``                 the input shape with 1 at the         none                    the input (predecessor's
                            unstacked axis                                                output): all the pieces
``Stack``                   the stacked shape with 1 at the new   none                    the stacked tensor, its
                            axis                                                          count from the successor
==========================  ====================================  ======================  ==========================

Because PaSE's names do not carry every attribute, a few op types are
recognised by shape: ``Einsum`` by its rank and the signatures above (the
equation is not in the tables), ``Norm`` by rank (4: per-channel batch norm,
2 or 3: layer norm over the last dimension), ``ReduceMean`` only at rank 4, and
the sizes the domain hides (``Concat``'s output length, ``Unstack``'s and
``Stack``'s count) from the neighbouring layers.  An op type, rank or shape
outside these raises :class:`~milp_partition.errors.InputError` naming the
layer; nothing is guessed silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from milp_partition.errors import InputError
from milp_partition.strategy.problem import StrategyNode, StrategyProblem

__all__ = [
    "SUPPORTED_OP_TYPES",
    "LayerTensors",
    "MemoryModelSettings",
    "TensorLayout",
    "config_factors",
    "layer_tensors",
    "memory_per_config",
    "parse_layer_name",
    "with_memory",
]

_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(\s*dom\s*=\s*(\d+(?:x\d+)*)\s*\)\s*$")


@dataclass(frozen=True)
class MemoryModelSettings:
    """Settings of the per-configuration memory model.

    Attributes
    ----------
    bytes_per_element
        Bytes of one tensor element (4: float32).
    optimizer_state_factor
        Bytes held per parameter byte: the parameter, its gradient and the
        optimizer's state (3.0: parameter, gradient and one momentum).
    keep_activations
        Count the output activation each layer keeps for the backward pass.
    """

    bytes_per_element: int = 4
    optimizer_state_factor: float = 3.0
    keep_activations: bool = True


@dataclass(frozen=True)
class TensorLayout:
    """A tensor of a layer in terms of the layer's iteration domain.

    Attributes
    ----------
    sizes
        Length of each tensor dimension.
    axes
        For each tensor dimension, the domain dimension whose split factor divides it.
    copies
        How many tensors of this layout there are (LSTM gates, norm scale and bias).
    """

    sizes: tuple[int, ...]
    axes: tuple[int, ...]
    copies: int = 1

    def elements_per_device(self, factors: np.ndarray) -> np.ndarray:
        """Elements one device holds for each configuration.

        Parameters
        ----------
        factors
            ``(configs, rank)`` integer split factors of the domain dimensions.

        Returns
        -------
        numpy.ndarray
            ``(configs,)`` int64: ``copies * prod_i ceil(sizes[i] / factors[:, axes[i]])``.
        """
        result = np.full(factors.shape[0], self.copies, dtype=np.int64)
        for size, axis in zip(self.sizes, self.axes, strict=True):
            result *= -(-size // factors[:, axis])
        return result


@dataclass(frozen=True)
class LayerTensors:
    """What a layer holds: its op type, domain, parameter tensors and output activation."""

    op_type: str
    domain: tuple[int, ...]
    weights: tuple[TensorLayout, ...]
    output: TensorLayout


def _tensor(domain: Sequence[int], axes: Sequence[int], copies: int = 1) -> TensorLayout:
    """The tensor spanned by domain dimensions ``axes`` (in tensor order)."""
    return TensorLayout(tuple(domain[a] for a in axes), tuple(axes), copies)


def _whole(domain: Sequence[int]) -> TensorLayout:
    return _tensor(domain, range(len(domain)))


# ---------------------------------------------------------------------------
# Parsing names and configurations
# ---------------------------------------------------------------------------


def parse_layer_name(name: str) -> tuple[str, tuple[int, ...]] | None:
    """Split a PaSE layer name such as ``Conv(dom=128x3x55x55x11x11x96)`` into op type and domain.

    Parameters
    ----------
    name
        The node's name.

    Returns
    -------
    tuple or None
        ``(op_type, domain)``, or ``None`` when the name has another form.
    """
    match = _NAME.match(name)
    if match is None:
        return None
    return match.group(1), tuple(int(d) for d in match.group(2).split("x"))


def config_factors(node: StrategyNode, rank: int, source: str = "") -> np.ndarray:
    """The split factors of every configuration of ``node``.

    Parameters
    ----------
    node
        The layer; each configuration name is ``rank`` positive integers joined by ``x``.
    rank
        The number of domain dimensions.
    source
        The file, for messages.

    Returns
    -------
    numpy.ndarray
        ``(len(node.configs), rank)`` int64.

    Raises
    ------
    InputError
        On a configuration that is not ``rank`` positive integers.
    """
    rows = []
    for config in node.configs:
        parts = config.split("x")
        if len(parts) != rank or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise InputError(
                f"configuration {config!r} is not {rank} positive split factors joined by 'x' (one per domain dimension)",
                source=source,
                where=f"node {node.id!r} ({node.name})",
            )
        rows.append([int(p) for p in parts])
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), rank)


# ---------------------------------------------------------------------------
# Per-op-type layouts
# ---------------------------------------------------------------------------


class _Layers:
    """Resolves the :class:`LayerTensors` of every layer of one problem (some need their neighbours)."""

    def __init__(self, problem: StrategyProblem) -> None:
        self.problem = problem
        self.nodes = {n.id: n for n in problem.nodes}
        self.preds: dict[str, list[str]] = {n.id: [] for n in problem.nodes}
        self.succs: dict[str, list[str]] = {n.id: [] for n in problem.nodes}
        for e in problem.edges:
            self.preds[e.target].append(e.source)
            self.succs[e.source].append(e.target)
        self.parsed: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.cache: dict[str, LayerTensors] = {}
        self.builders: Mapping[str, Callable[[str, tuple[int, ...]], LayerTensors]] = {
            "Conv": self._conv,
            "FC": self._fc,
            "Einsum": self._einsum,
            "LSTM": self._lstm,
            "Norm": self._norm,
            "Pooling": self._activation_only,
            "Elementwise": self._activation_only,
            "Softmax": self._activation_only,
            "SoftmaxCrossEntropy": self._activation_only,
            "Ravel": self._activation_only,
            "Unravel": self._activation_only,
            "ReduceMean": self._reduce_mean,
            "Concat": self._concat,
            "Unstack": self._unstack,
            "Stack": self._stack,
        }

    # -- helpers -----------------------------------------------------------

    def error(self, node_id: str, message: str) -> InputError:
        node = self.nodes[node_id]
        return InputError(message, source=self.problem.source or None, where=f"node {node_id!r} ({node.name})")

    def parse(self, node_id: str) -> tuple[str, tuple[int, ...]]:
        if node_id not in self.parsed:
            parsed = parse_layer_name(self.nodes[node_id].name)
            if parsed is None:
                raise self.error(
                    node_id,
                    "the name is not a PaSE layer name such as 'Conv(dom=128x3x55x55x11x11x96)'; "
                    "memory is derived from the op type and iteration domain in the name",
                )
            self.parsed[node_id] = parsed
        return self.parsed[node_id]

    def need_rank(self, node_id: str, domain: tuple[int, ...], ranks: Sequence[int], what: str) -> None:
        if len(domain) not in ranks:
            op = self.parse(node_id)[0]
            expected = " or ".join(str(r) for r in ranks)
            raise self.error(
                node_id, f"op type {op!r} with a {len(domain)}-dimensional domain is not understood; expected {expected} ({what})"
            )

    def unit_axis(self, node_id: str, domain: tuple[int, ...]) -> int:
        """The one domain dimension of length 1 (PaSE's concatenation / stacking axis)."""
        axes = [i for i, d in enumerate(domain) if d == 1]
        if len(axes) != 1:
            op = self.parse(node_id)[0]
            raise self.error(
                node_id,
                f"op type {op!r}: cannot tell the {op} axis; PaSE marks it as the one domain dimension of length 1, found {len(axes)}",
            )
        return axes[0]

    def get(self, node_id: str) -> LayerTensors:
        if node_id not in self.cache:
            op, domain = self.parse(node_id)
            builder = self.builders.get(op)
            if builder is None:
                raise self.error(
                    node_id,
                    f"op type {op!r} is not understood by the memory model; known op types: {', '.join(sorted(self.builders))}",
                )
            self.cache[node_id] = builder(node_id, domain)
        return self.cache[node_id]

    # -- op types ----------------------------------------------------------

    def _conv(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, (7,), "(b, c, h, w, r, s, n)")
        return LayerTensors("Conv", dom, (_tensor(dom, (1, 4, 5, 6)),), _tensor(dom, (0, 6, 2, 3)))

    def _fc(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, range(3, 10), "(batch dims..., n_out, n_in)")
        rank = len(dom)
        return LayerTensors("FC", dom, (_tensor(dom, (rank - 1, rank - 2)),), _tensor(dom, range(rank - 1)))

    def _einsum(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, (4, 5, 6), "PaSE's projection and attention einsums")
        if len(dom) == 4:  # blk,kn->bln
            return LayerTensors("Einsum", dom, (_tensor(dom, (3, 2)),), _tensor(dom, (0, 1, 2)))
        if len(dom) == 6:  # sble,shek->sbhlk
            if dom[5] != dom[2] * dom[4]:
                raise self.error(
                    node_id,
                    "op type 'Einsum' with a 6-dimensional domain is understood only as the stacked Q/K/V "
                    "projection (s, b, h, l, k, e) with e = h*k",
                )
            return LayerTensors("Einsum", dom, (_tensor(dom, (0, 2, 5, 4)),), _tensor(dom, (0, 1, 2, 3, 4)))
        projection = dom[2] == dom[3] * dom[4]  # bhlk,hek->ble: (b, l, e, h, k)
        attention = dom[2] in (dom[3], dom[4])  # bhlk,bhmk->bhlm or bhlm,bhmk->bhlk
        if projection == attention:
            raise self.error(
                node_id,
                "op type 'Einsum' with a 5-dimensional domain is understood only as the head-merging projection "
                "(b, l, e, h, k) with e = h*k or as attention (b, h, l, m, k) / (b, h, l, k, m) with l == m; "
                f"this domain fits {'both' if projection else 'neither'}",
            )
        if projection:
            return LayerTensors("Einsum", dom, (_tensor(dom, (3, 2, 4)),), _tensor(dom, (0, 1, 2)))
        return LayerTensors("Einsum", dom, (), _tensor(dom, (0, 1, 2, 3)))

    def _lstm(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, (5,), "(layers, sequence, batch, units, units)")
        return LayerTensors("LSTM", dom, (_tensor(dom, (0, 3, 4), copies=8),), _tensor(dom, (0, 1, 2, 3), copies=6))

    def _norm(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, (2, 3, 4), "(b, c, h, w) batch norm or (b..., e) layer norm")
        channel = 1 if len(dom) == 4 else len(dom) - 1
        return LayerTensors("Norm", dom, (_tensor(dom, (channel,), copies=2),), _whole(dom))

    def _activation_only(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        return LayerTensors(self.parse(node_id)[0], dom, (), _whole(dom))

    def _reduce_mean(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        self.need_rank(node_id, dom, (4,), "(b, c, h, w), mean over h and w")
        return LayerTensors("ReduceMean", dom, (), _tensor(dom, (0, 1)))

    def _neighbour_sizes(self, node_id: str, other: tuple[int, ...], dom: tuple[int, ...], axis: int, role: str) -> int:
        """``other[axis]`` after checking that ``other`` matches ``dom`` off the axis."""
        if len(other) != len(dom) or any(o != d for i, (o, d) in enumerate(zip(other, dom)) if i != axis):
            raise self.error(
                node_id,
                f"op type {self.parse(node_id)[0]!r}: the {role} has shape {'x'.join(map(str, other))}, "
                f"which does not match the domain {'x'.join(map(str, dom))} off axis {axis}",
            )
        return other[axis]

    def _concat(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        axis = self.unit_axis(node_id, dom)
        preds = self.preds[node_id]
        if len(preds) < 2:
            raise self.error(node_id, "op type 'Concat' needs at least two predecessors to tell its output length")
        total = sum(self._neighbour_sizes(node_id, self.get(p).output.sizes, dom, axis, f"input from {p!r}") for p in preds)
        for s in self.succs[node_id]:
            wanted = self._input_channels(s)
            if axis == 1 and wanted is not None and wanted != total:
                raise self.error(
                    node_id,
                    f"op type 'Concat': its inputs add up to {total} along axis 1 but successor {s!r} reads {wanted}; "
                    "an input may be missing from the edges",
                )
        sizes = (*dom[:axis], total, *dom[axis + 1 :])
        return LayerTensors("Concat", dom, (), TensorLayout(sizes, tuple(range(len(dom)))))

    def _input_channels(self, node_id: str) -> int | None:
        """Channel count (dim 1) of a (b, c, h, w) layer's input, where its domain shows it."""
        op, dom = self.parse(node_id)
        if op in ("Conv", "Pooling", "ReduceMean") or (op == "Norm" and len(dom) == 4):
            return dom[1]
        return None

    def _unstack(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        axis = self.unit_axis(node_id, dom)
        preds = self.preds[node_id]
        if len(preds) != 1:
            raise self.error(node_id, f"op type 'Unstack' needs exactly one predecessor, has {len(preds)}")
        pred_sizes = self.get(preds[0]).output.sizes
        self._neighbour_sizes(node_id, pred_sizes, dom, axis, f"input from {preds[0]!r}")
        return LayerTensors("Unstack", dom, (), TensorLayout(pred_sizes, tuple(range(len(dom)))))

    def _stack(self, node_id: str, dom: tuple[int, ...]) -> LayerTensors:
        axis = self.unit_axis(node_id, dom)
        counts = set()
        for s in self.succs[node_id]:
            op, sdom = self.parse(s)
            if op == "Einsum" and len(sdom) == 6:  # sble,shek->sbhlk reads (s, b, l, e)
                counts.add(self._neighbour_sizes(node_id, tuple(sdom[i] for i in (0, 1, 3, 5)), dom, axis, f"successor {s!r}"))
        if len(counts) != 1:
            raise self.error(
                node_id,
                "op type 'Stack': cannot tell how many tensors it stacks; expected one successor that is a stacked "
                "projection Einsum (s, b, h, l, k, e)",
            )
        sizes = (*dom[:axis], counts.pop(), *dom[axis + 1 :])
        return LayerTensors("Stack", dom, (), TensorLayout(sizes, tuple(range(len(dom)))))


#: Op types the memory model understands.
SUPPORTED_OP_TYPES: tuple[str, ...] = (
    "Concat",
    "Conv",
    "Einsum",
    "Elementwise",
    "FC",
    "LSTM",
    "Norm",
    "Pooling",
    "Ravel",
    "ReduceMean",
    "Softmax",
    "SoftmaxCrossEntropy",
    "Stack",
    "Unravel",
    "Unstack",
)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def layer_tensors(problem: StrategyProblem) -> dict[str, LayerTensors]:
    """The parameter and output-activation layout of every layer.

    Parameters
    ----------
    problem
        A problem whose node names are PaSE layer names.

    Returns
    -------
    dict
        ``node id -> LayerTensors``.

    Raises
    ------
    InputError
        Naming the layer, on a name that is not a PaSE layer name or an op type,
        rank or shape the model does not understand.
    """
    layers = _Layers(problem)
    return {n.id: layers.get(n.id) for n in problem.nodes}


def memory_per_config(problem: StrategyProblem, settings: MemoryModelSettings = MemoryModelSettings()) -> dict[str, np.ndarray]:
    """Per-device memory of every configuration of every layer, in whole bytes.

    Parameters
    ----------
    problem
        A problem whose node names are PaSE layer names and whose configuration
        names are split factors, one per domain dimension.
    settings
        The memory model's settings.

    Returns
    -------
    dict
        ``node id -> (len(configs),)`` int64 array (see the module docstring for the formula).

    Raises
    ------
    InputError
        On a layer the model does not understand or a malformed configuration name.
    """
    _check_settings(settings, problem.source)
    nodes = {n.id: n for n in problem.nodes}
    result: dict[str, np.ndarray] = {}
    for node_id, layer in layer_tensors(problem).items():
        factors = config_factors(nodes[node_id], len(layer.domain), problem.source)
        result[node_id] = _layer_memory(layer, factors, settings)
    return result


def activation_per_config(
    problem: StrategyProblem, settings: MemoryModelSettings = MemoryModelSettings()
) -> dict[str, np.ndarray]:
    """The output-activation part of :func:`memory_per_config`: ``ceil(bytes_per_element * A)`` per configuration."""
    _check_settings(settings, problem.source)
    nodes = {n.id: n for n in problem.nodes}
    result: dict[str, np.ndarray] = {}
    for node_id, layer in layer_tensors(problem).items():
        factors = config_factors(nodes[node_id], len(layer.domain), problem.source)
        act = layer.output.elements_per_device(factors) if settings.keep_activations else np.zeros(factors.shape[0])
        result[node_id] = np.ceil(settings.bytes_per_element * np.asarray(act, dtype=np.float64)).astype(np.int64)
    return result


def _layer_memory(layer: LayerTensors, factors: np.ndarray, settings: MemoryModelSettings) -> np.ndarray:
    weights = np.zeros(factors.shape[0], dtype=np.int64)
    for tensor in layer.weights:
        weights += tensor.elements_per_device(factors)
    activations = layer.output.elements_per_device(factors) if settings.keep_activations else 0
    total = settings.bytes_per_element * (settings.optimizer_state_factor * weights.astype(np.float64) + activations)
    return np.ceil(total).astype(np.int64)


def _check_settings(settings: MemoryModelSettings, source: str) -> None:
    bpe, factor = settings.bytes_per_element, settings.optimizer_state_factor
    if isinstance(bpe, bool) or not isinstance(bpe, int) or bpe < 1:
        raise InputError(f"bytes_per_element must be a positive integer, got {bpe!r}", source=source or None)
    if not math.isfinite(factor) or factor < 0:
        raise InputError(f"optimizer_state_factor must be finite and >= 0, got {factor!r}", source=source or None)


def with_memory(
    problem: StrategyProblem,
    settings: MemoryModelSettings = MemoryModelSettings(),
    memory_limit_bytes: int | None = None,
) -> StrategyProblem:
    """A copy of ``problem`` with ``memory_bytes`` on every layer and the given memory limit.

    Parameters
    ----------
    problem
        A PaSE problem (node names such as ``FC(dom=128x4096x9216)``).
    settings
        The memory model's settings.
    memory_limit_bytes
        Per-device limit on the sum of the chosen configurations' memory, or ``None``.

    Returns
    -------
    StrategyProblem
        Equal to ``problem`` except for ``memory_bytes`` (int64, whole bytes, one
        per configuration) and its output-activation part ``activation_bytes`` on
        every node, and ``memory_limit_bytes``.

    Raises
    ------
    InputError
        On a layer the model does not understand (naming the node and op type),
        a malformed configuration name, or a limit that is not a non-negative integer.
    """
    if memory_limit_bytes is not None and (
        isinstance(memory_limit_bytes, bool) or not isinstance(memory_limit_bytes, (int, np.integer)) or memory_limit_bytes < 0
    ):
        raise InputError(
            f"memory_limit_bytes must be a non-negative integer or None, got {memory_limit_bytes!r}",
            source=problem.source or None,
        )
    memory = memory_per_config(problem, settings)
    activation = activation_per_config(problem, settings)
    nodes = tuple(
        replace(n, memory_bytes=memory[n.id], activation_bytes=np.minimum(activation[n.id], memory[n.id])) for n in problem.nodes
    )
    limit = None if memory_limit_bytes is None else int(memory_limit_bytes)
    return replace(problem, nodes=nodes).with_memory_limit(limit)
