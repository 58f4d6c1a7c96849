r"""Strategy problems generated from a layer graph and a device profile.

Each layer kind has an *iteration domain* of named dimensions; a configuration
gives every dimension a split factor (a power of two), their product at most
``p``.  A configuration's cost is what one device spends on the layer, in
seconds, from the cost model (:class:`~milp_partition.calibration.profile.DeviceProfile`):

.. math::

    a_v(c) = k \cdot t_{\mathrm{comp}}\!\left(\frac{F_v}{\pi(c)}, \frac{Q_v}{\pi(c)}\right)
             + k_g \cdot \mathrm{AR}\!\left(\frac{W_v}{\pi_W(c)}, \pi_R(c)\right)
             + k_s \cdot \mathrm{AR}\!\left(\frac{O_v}{\pi_O(c)}, \pi_K(c)\right)

where :math:`F_v` are the layer's forward FLOPs and :math:`Q_v` the bytes it
reads and writes, :math:`\pi(c)` the product of all split factors,
:math:`\pi_W` of those over the dimensions the parameters span, :math:`\pi_R =
\pi / \pi_W` the number of replicas of each parameter shard (their gradients are
all-reduced once per step), :math:`\pi_K` the product over *contraction*
dimensions (splitting them leaves partial sums, all-reduced in the forward pass
and again for the input gradient in the backward pass), :math:`O_v` the output
bytes and :math:`\pi_O` the product over the output's dimensions.  ``AR`` is the
profile's ring all-reduce, :math:`t_{\mathrm{comp}}` its roofline.  With
``training`` (the default) :math:`k = 3` (forward, and a backward of twice the
forward's work), :math:`k_g = 1`, :math:`k_s = 2`; for inference :math:`k = 1,
k_g = 0, k_s = 1`.

Edges carry the producer's output tensor, seen as three logical axes (batch,
feature, spatial).  A configuration lays a tensor out by a split factor per axis;
devices are numbered so that the tiles nest (power-of-two splits on aligned
device ranks), so a consumer tile of a tensor split :math:`b` ways along an axis
already holds the fraction :math:`b / \max(a, b)` of what it needs when the
producer split that axis :math:`a` ways.  The re-distribution cost is

.. math::

    B_{uv}(c_u, c_v) = k_e \cdot \mathrm{xfer}\!\left(\frac{T_{uv}}{\pi_{in}(c_v)}
        \Bigl(1 - \prod_{\text{axes}} \frac{b}{\max(a, b)}\Bigr)\right)

with :math:`T_{uv}` the tensor's bytes, :math:`\mathrm{xfer}` the profile's
device-to-device alpha-beta time (zero when nothing moves) and :math:`k_e = 2`
in training (activation forward, gradient backward), 1 otherwise.

Per-device memory of a configuration (bytes):
:math:`(1 + s)\,W_v/\pi_W(c)` for parameters, their gradients folded into the
optimizer-state factor :math:`s`, plus the output activation kept for the
backward pass, :math:`O_v/\pi_O(c)` (``activation_bytes``, the part that the
liveness memory model frees after the last consumer).

Layer kinds and their domains (``b`` is the batch, in samples or tokens):

=============  ============================  ==================  ===========  ============  =====================
kind           domain                        split               params span  contraction   output axes (b, f, s)
=============  ============================  ==================  ===========  ============  =====================
``linear``     b, n_in, n_out                b, n_in, n_out      n_in, n_out  n_in          b, n_out, -
``conv2d``     b, c_in, c_out, h, w, r, s    b, c_in, c_out, h   c_in, c_out  c_in          b, c_out, h
``attention``  b, heads, seq, d_head         b, heads            -            -             b, heads, -
``embedding``  b, vocab, d                   b, vocab, d         vocab, d     vocab         b, d, -
``elementwise`` b, n                         b, n                -            -             b, n, -
``norm``       b, n                          b                   n (scale)    -             b, n, -
=============  ============================  ==================  ===========  ============  =====================

Simplifications, stated: a conv split along ``h`` ignores the halo rows; the
attention layer is the score-and-mix core (its projections are ``linear``
layers); a split that leaves devices idle (product below ``p``) is allowed, as
in PaSE.  References: Elango, "Efficient Parallelization Strategy Search for
DNN Training" (PaSE, IPDPS 2021); Zheng et al., "Alpa" (OSDI 2022), whose
intra-operator pass has the same cost structure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from milp_partition.calibration.profile import DeviceProfile
from milp_partition.errors import CycleError, InputError
from milp_partition.graph import find_cycle
from milp_partition.io.json_text import check_list, check_object, get_str, get_value, parse_json, read_text_file, to_id
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, strategy_cluster


@dataclass(frozen=True)
class LayerSpec:
    """One layer: its kind and the length of each domain dimension (see the module table)."""

    id: str
    kind: str
    dims: Mapping[str, int]
    name: str = ""


@dataclass(frozen=True)
class LayerGraph:
    """Layers and the tensors between them (each edge carries the source's output)."""

    layers: tuple[LayerSpec, ...]
    edges: tuple[tuple[str, str], ...]
    name: str = ""


@dataclass(frozen=True)
class StrategyGenerationSettings:
    """How configurations and their costs are generated.

    Attributes
    ----------
    devices
        p, the number of devices a layer may split over (a power of two).
    bytes_per_element
        Element size of activations, parameters and gradients.
    dtype
        The profile's compute rate to use (``"float32"``, ``"float16"`` ...).
    training
        Cost a training step (forward, backward, gradient all-reduce) or a forward pass only.
    optimizer_state_factor
        Bytes of gradient and optimizer state per parameter byte (Adam in fp32: 3).
    max_configs_per_layer
        Refuse (with a clear message) rather than build more configurations than this for one layer.
    """

    devices: int
    bytes_per_element: int = 4
    dtype: str = "float32"
    training: bool = True
    optimizer_state_factor: float = 3.0
    max_configs_per_layer: int = 2000


@dataclass(frozen=True)
class _Kind:
    dims: tuple[str, ...]
    split: tuple[str, ...]
    param_dims: tuple[str, ...]
    contraction: tuple[str, ...]
    out_axes: tuple[str | None, str | None, str | None]
    in_axes: tuple[str | None, str | None, str | None]


_KINDS: Mapping[str, _Kind] = {
    "linear": _Kind(
        ("b", "n_in", "n_out"), ("b", "n_in", "n_out"), ("n_in", "n_out"), ("n_in",), ("b", "n_out", None), ("b", "n_in", None)
    ),
    "conv2d": _Kind(
        ("b", "c_in", "c_out", "h", "w", "r", "s"),
        ("b", "c_in", "c_out", "h"),
        ("c_in", "c_out"),
        ("c_in",),
        ("b", "c_out", "h"),
        ("b", "c_in", "h"),
    ),
    "attention": _Kind(("b", "heads", "seq", "d_head"), ("b", "heads"), (), (), ("b", "heads", None), ("b", "heads", None)),
    "embedding": _Kind(("b", "vocab", "d"), ("b", "vocab", "d"), ("vocab", "d"), ("vocab",), ("b", "d", None), ("b", None, None)),
    "elementwise": _Kind(("b", "n"), ("b", "n"), (), (), ("b", "n", None), ("b", "n", None)),
    "norm": _Kind(("b", "n"), ("b",), ("n",), (), ("b", "n", None), ("b", "n", None)),
}

#: Largest length of one layer dimension (batch, width, sequence ...): products of a few stay within 64-bit byte counts.
MAX_DIMENSION = 2**24
#: The layer kinds :func:`generate_strategy_problem` knows.
LAYER_KINDS: tuple[str, ...] = tuple(_KINDS)


def _flops(kind: str, d: Mapping[str, int]) -> float:
    if kind == "linear":
        return 2.0 * d["b"] * d["n_in"] * d["n_out"]
    if kind == "conv2d":
        return 2.0 * d["b"] * d["c_in"] * d["c_out"] * d["h"] * d["w"] * d["r"] * d["s"]
    if kind == "attention":
        return 4.0 * d["b"] * d["heads"] * d["seq"] * d["seq"] * d["d_head"]  # scores and mix
    if kind == "embedding":
        return float(d["b"] * d["d"])
    if kind == "elementwise":
        return float(d["b"] * d["n"])
    return 5.0 * d["b"] * d["n"]  # norm: mean, variance, scale, shift


def _elements(kind: str, d: Mapping[str, int]) -> tuple[float, float, float]:
    """(parameter, input, output) elements of a layer."""
    if kind == "linear":
        return d["n_in"] * d["n_out"], d["b"] * d["n_in"], d["b"] * d["n_out"]
    if kind == "conv2d":
        return (
            d["c_in"] * d["c_out"] * d["r"] * d["s"],
            d["b"] * d["c_in"] * d["h"] * d["w"],
            d["b"] * d["c_out"] * d["h"] * d["w"],
        )
    if kind == "attention":
        x = d["b"] * d["seq"] * d["heads"] * d["d_head"]
        return 0, 3 * x, x
    if kind == "embedding":
        return d["vocab"] * d["d"], d["b"], d["b"] * d["d"]
    if kind == "elementwise":
        return 0, d["b"] * d["n"], d["b"] * d["n"]
    return 2 * d["n"], d["b"] * d["n"], d["b"] * d["n"]


def _check_layer(layer: LayerSpec, source: str) -> _Kind:
    where = f"layer {layer.id!r}"
    if layer.kind not in _KINDS:
        raise InputError(f"unknown kind {layer.kind!r}; known kinds: {', '.join(LAYER_KINDS)}", source=source, where=where)
    kind = _KINDS[layer.kind]
    for dim in kind.dims:
        value = layer.dims.get(dim)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_DIMENSION:
            raise InputError(
                f"dimension {dim!r} must be a whole number from 1 to {MAX_DIMENSION}, got {value!r}; a {layer.kind} "
                f"layer needs {', '.join(kind.dims)}",
                source=source,
                where=where,
            )
    extra = set(layer.dims) - set(kind.dims)
    if extra:
        raise InputError(
            f"unknown dimension(s) {', '.join(sorted(extra))} for a {layer.kind} layer; it takes {', '.join(kind.dims)}",
            source=source,
            where=where,
        )
    return kind


def _splits(kind: _Kind, dims: Mapping[str, int], p: int) -> list[dict[str, int]]:
    """Every assignment of power-of-two split factors to the splittable dims, product <= p, factor <= the dim's length."""
    powers = [1 << k for k in range(int(math.log2(p)) + 1)]
    options = [[f for f in powers if f <= dims[name]] for name in kind.split]
    result = []
    for combo in itertools.product(*options):
        if math.prod(combo) <= p:
            result.append(dict(zip(kind.split, combo)))
    return result


def _tiling(axes: tuple[str | None, ...], split: Mapping[str, int]) -> tuple[int, int, int]:
    return tuple(split.get(a, 1) if a is not None else 1 for a in axes)  # type: ignore[return-value]


def _moved_fraction(producer: np.ndarray, consumer: np.ndarray) -> np.ndarray:
    """(P, C): fraction of a consumer tile that is not already on the device (nested power-of-two tiles)."""
    a = producer[:, None, :]
    b = consumer[None, :, :]
    local = np.prod(b / np.maximum(a, b), axis=2)
    return 1.0 - local


def check_layer_graph(graph: LayerGraph, source: str = "") -> None:
    """Raise :class:`InputError` on an unknown kind or dimension, a length that is not a whole number in
    ``[1, MAX_DIMENSION]``, a duplicate id, an edge naming an unknown layer, or a cycle."""
    ids = [layer.id for layer in graph.layers]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise InputError("duplicate layer id; every layer needs its own id", source=source, where=f"layer {dup!r}")
    for layer in graph.layers:
        _check_layer(layer, source)
    known = set(ids)
    for a, b in graph.edges:
        for end in (a, b):
            if end not in known:
                raise InputError(f"names unknown layer {end!r}", source=source, where=f"edge {a!r} -> {b!r}")
    cycle = find_cycle(ids, list(graph.edges))
    if cycle is not None:
        raise CycleError(cycle, source=source)


def generate_strategy_problem(
    graph: LayerGraph, profile: DeviceProfile, settings: StrategyGenerationSettings, *, source: str = ""
) -> StrategyProblem:
    """Enumerate every layer's configurations and cost them with ``profile``.

    Returns
    -------
    StrategyProblem
        Costs in seconds per step on one device; per-configuration ``memory_bytes`` and
        ``activation_bytes``; no memory limit (set one with :meth:`StrategyProblem.with_memory_limit`).

    Raises
    ------
    InputError
        On an unknown kind or dimension, a non-positive length, an unknown or duplicate id,
        a cycle, ``devices`` not a power of two, or too many configurations for one layer.
    """
    p = settings.devices
    if p < 1 or p & (p - 1):
        raise InputError(f"devices must be a power of two, got {p}", source=source, where="devices")
    check_layer_graph(graph, source)
    train = settings.training
    k_comp, k_grad, k_sum, k_edge = (3.0, 1.0, 2.0, 2.0) if train else (1.0, 0.0, 1.0, 1.0)
    bpe = settings.bytes_per_element
    nodes: list[StrategyNode] = []
    tilings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    out_bytes: dict[str, float] = {}
    for layer in graph.layers:
        kind = _check_layer(layer, source)
        splits = _splits(kind, layer.dims, p)
        if len(splits) > settings.max_configs_per_layer:
            raise InputError(
                f"has {len(splits)} configurations, over max_configs_per_layer={settings.max_configs_per_layer}",
                source=source,
                where=f"layer {layer.id!r}",
            )
        flops = _flops(layer.kind, layer.dims)
        w_el, i_el, o_el = _elements(layer.kind, layer.dims)
        w_b, i_b, o_b = w_el * bpe, i_el * bpe, o_el * bpe
        out_bytes[layer.id] = o_b
        costs, mems, acts, names = [], [], [], []
        for split in splits:
            total = math.prod(split.values())
            pw = math.prod(split.get(x, 1) for x in kind.param_dims)
            po = math.prod(_tiling(kind.out_axes, split))
            pk = math.prod(split.get(x, 1) for x in kind.contraction)
            replicas = total // pw
            cost = k_comp * profile.compute_time_s(flops / total, (w_b + i_b + o_b) / total, settings.dtype)
            cost += k_grad * profile.allreduce_time_s(w_b / pw, replicas) if w_b else 0.0
            cost += k_sum * profile.allreduce_time_s(o_b / po, pk) if pk > 1 else 0.0
            costs.append(cost)
            act = math.ceil(o_b / po)
            state = 1.0 + settings.optimizer_state_factor if train else 1.0
            mems.append(math.ceil(state * w_b / pw) + act)
            acts.append(act)
            names.append("x".join(str(split.get(dim, 1)) for dim in kind.dims))
        tilings[layer.id] = (
            np.array([_tiling(kind.out_axes, s) for s in splits], dtype=np.float64),
            np.array([_tiling(kind.in_axes, s) for s in splits], dtype=np.float64),
        )
        dims = "x".join(str(layer.dims[d]) for d in kind.dims)
        nodes.append(
            StrategyNode(
                id=layer.id,
                name=layer.name or f"{layer.kind}(dom={dims})",
                configs=tuple(names),
                cost=np.asarray(costs, dtype=np.float64),
                memory_bytes=np.asarray(mems, dtype=np.int64),
                activation_bytes=np.asarray(acts, dtype=np.int64),
            )
        )
    xfer = np.vectorize(lambda nbytes: profile.transfer_time_s(float(nbytes), "d2d") if nbytes > 0 else 0.0, otypes=[float])
    edges = []
    for a, b in graph.edges:
        produced = tilings[a][0]
        consumed = tilings[b][1]
        moved = _moved_fraction(produced, consumed) * out_bytes[a] / np.prod(consumed, axis=1)[None, :]
        edges.append(StrategyEdge(source=a, target=b, cost=k_edge * xfer(moved)))
    return StrategyProblem(
        nodes=tuple(nodes),
        edges=tuple(edges),
        name=graph.name,
        cost_unit="s",
        cluster=strategy_cluster(p).with_peak_flops(_peak_flops(profile, settings.dtype)),
        source=source,
        extra={
            "source_text": f"generated by milp-partition from layer shapes with profile {profile.name!r}",
            "dimensions": {layer.id: _KINDS[layer.kind].dims for layer in graph.layers},
        },
    )


def _peak_flops(profile: DeviceProfile, dtype: str) -> float | None:
    """The profile's peak FLOP/s for ``dtype`` (the cluster's compute profile), ``None`` when it has none."""
    rate = profile.compute.get(dtype)
    return None if rate is None else rate.peak_flop_per_s


def transformer_layer_graph(
    num_blocks: int,
    *,
    batch_tokens: int,
    seq: int,
    hidden: int,
    heads: int,
    ffn: int | None = None,
    vocab: int = 0,
    name: str = "",
) -> LayerGraph:
    """A GPT-style stack: (embedding) -> [norm, qkv, attention, proj, add, norm, fc1, gelu, fc2, add] x blocks (-> norm, head).

    ``batch_tokens`` is the batch in tokens (samples x ``seq``).  With ``vocab`` > 0 an
    embedding starts the stack and a final norm and output projection end it.
    """
    if hidden % heads:
        raise InputError(f"hidden ({hidden}) must be a multiple of heads ({heads})", where="transformer")
    ffn = ffn or 4 * hidden
    b = batch_tokens
    layers: list[LayerSpec] = []
    edges: list[tuple[str, str]] = []
    prev: str | None = None
    if vocab:
        layers.append(LayerSpec("embed", "embedding", {"b": b, "vocab": vocab, "d": hidden}))
        prev = "embed"
    for k in range(num_blocks):

        def lid(s: str, k: int = k) -> str:
            return f"b{k}.{s}"

        block = [
            LayerSpec(lid("norm1"), "norm", {"b": b, "n": hidden}),
            LayerSpec(lid("qkv"), "linear", {"b": b, "n_in": hidden, "n_out": 3 * hidden}),
            LayerSpec(lid("attn"), "attention", {"b": b // seq, "heads": heads, "seq": seq, "d_head": hidden // heads}),
            LayerSpec(lid("proj"), "linear", {"b": b, "n_in": hidden, "n_out": hidden}),
            LayerSpec(lid("add1"), "elementwise", {"b": b, "n": hidden}),
            LayerSpec(lid("norm2"), "norm", {"b": b, "n": hidden}),
            LayerSpec(lid("fc1"), "linear", {"b": b, "n_in": hidden, "n_out": ffn}),
            LayerSpec(lid("gelu"), "elementwise", {"b": b, "n": ffn}),
            LayerSpec(lid("fc2"), "linear", {"b": b, "n_in": ffn, "n_out": hidden}),
            LayerSpec(lid("add2"), "elementwise", {"b": b, "n": hidden}),
        ]
        layers.extend(block)
        chain = [s.id for s in block]
        edges.extend(itertools.pairwise(chain[:5]))
        edges.extend(itertools.pairwise(chain[5:]))
        edges.append((lid("add1"), lid("norm2")))
        edges.append((lid("add1"), lid("add2")))
        if prev is not None:
            edges.append((prev, lid("norm1")))
            edges.append((prev, lid("add1")))
        prev = lid("add2")
    if vocab:
        layers.append(LayerSpec("norm_f", "norm", {"b": b, "n": hidden}))
        layers.append(LayerSpec("head", "linear", {"b": b, "n_in": hidden, "n_out": vocab}))
        if prev is not None:
            edges.append((prev, "norm_f"))
        edges.append(("norm_f", "head"))
    return LayerGraph(tuple(layers), tuple(edges), name=name or f"transformer-{num_blocks}x{hidden}")


# ---------------------------------------------------------------------------
# The strategy-layers/1 file format
# ---------------------------------------------------------------------------

LAYERS_FORMAT = "strategy-layers/1"


def layer_graph_from_dict(data: object, source: str = "") -> LayerGraph:
    """Parse a ``strategy-layers/1`` object: ``{"format", "name", "layers": [{"id", "kind", <dims>...}], "edges": [{"source", "target"}]}``."""

    obj = check_object(data, "the top level", source)
    if obj.get("format") != LAYERS_FORMAT:
        raise InputError(f"'format' must be {LAYERS_FORMAT!r}, got {obj.get('format')!r}", source=source)
    layers = []
    for i, raw in enumerate(check_list(get_value(obj, "layers", "the top level", source), "field 'layers'", source)):
        raw = check_object(raw, f"layers[{i}]", source)
        lid = to_id(get_value(raw, "id", f"layers[{i}]", source), f"layers[{i}] field 'id'", source)
        kind = get_str(raw, "kind", f"layer {lid!r}", source)
        dims = {k: v for k, v in raw.items() if k not in ("id", "kind", "name")}
        layers.append(LayerSpec(lid, kind, dims, get_str(raw, "name", f"layer {lid!r}", source, "")))
    edges = []
    for i, raw in enumerate(check_list(get_value(obj, "edges", "the top level", source, []), "field 'edges'", source)):
        raw = check_object(raw, f"edges[{i}]", source)
        edges.append(
            (
                to_id(get_value(raw, "source", f"edges[{i}]", source), f"edges[{i}] field 'source'", source),
                to_id(get_value(raw, "target", f"edges[{i}]", source), f"edges[{i}] field 'target'", source),
            )
        )
    graph = LayerGraph(tuple(layers), tuple(edges), name=str(obj.get("name") or ""))
    check_layer_graph(graph, source)
    return graph


def layer_graph_to_dict(graph: LayerGraph) -> dict[str, object]:
    """The ``strategy-layers/1`` object of ``graph``."""
    return {
        "format": LAYERS_FORMAT,
        "name": graph.name,
        "layers": [
            {"id": s.id, "kind": s.kind, **{k: int(v) for k, v in s.dims.items()}, **({"name": s.name} if s.name else {})}
            for s in graph.layers
        ],
        "edges": [{"source": a, "target": b} for a, b in graph.edges],
    }


def looks_like_layer_graph(data: object) -> bool:
    """True for a parsed object that declares ``strategy-layers/1``."""
    return isinstance(data, Mapping) and data.get("format") == LAYERS_FORMAT


def read_layer_graph(path: str) -> LayerGraph:
    """Read and parse a ``strategy-layers/1`` file (layers are validated when generating)."""

    return layer_graph_from_dict(parse_json(read_text_file(path), str(path)), str(path))


__all__: Sequence[str] = (
    "LAYERS_FORMAT",
    "LAYER_KINDS",
    "LayerGraph",
    "LayerSpec",
    "StrategyGenerationSettings",
    "generate_strategy_problem",
    "layer_graph_from_dict",
    "layer_graph_to_dict",
    "looks_like_layer_graph",
    "read_layer_graph",
    "transformer_layer_graph",
)
