"""Megatron-style tensor-parallel splits of one layer's operators (Shoeybi et al., 2019).

Each operator of a layer gets a *role* at tensor-parallel degree ``t``:

``column``
    A linear layer split by output features (its weight's rows): FLOPs, parameters and output
    divided by ``t``; it keeps its whole input (saved for the backward pass, replicated).
``row``
    A linear layer split by input features: FLOPs, parameters and input (its saved activation)
    divided by ``t``; its output is a partial sum of the whole size, all-reduced forward.
``inner``
    An operator between a column and its row layer (attention scores, softmax and the
    weighted sum with the heads split over ``t``; the MLP's activation function): everything
    divided by ``t`` except buffers (a mask is held whole).
``replicated``
    Anything else (layer norms, embeddings, residual additions, unpaired linear layers): full
    cost on every one of the ``t`` devices.

The pairs are found from the module structure recorded at import
(:mod:`milp_partition.importers.layer_shapes`):

* an attention module (one with a head count): the linear layers run before its first operator
  with FLOPs (the attention scores) are ``column`` (fused QKV or separate Q, K, V); the last
  linear layer inside it after the scores, else the first linear layer after the module if it
  reads the values' width (Hugging Face BERT keeps it in a sibling module), is the output
  projection (``row``); the module's other operators between the first column layer and the
  row layer are ``inner`` (those after it, e.g. a dropout, see the whole output: ``replicated``);
  the heads (and key/value heads, where recorded) must divide by ``t`` (:class:`DegreeRefused`
  otherwise);
* outside attention, in execution order, a run of linear layers of one shape ``d -> h`` (an MLP's
  first layer, or gate and up projections) followed by one ``h -> d``: the run is ``column``, the
  follower ``row``, the operators in between ``inner``; a hidden width ``h`` that ``t`` does not
  divide leaves the pair replicated;
* the last linear layer of a layer with no successor (the LM head) is split by output features
  (vocabulary-parallel, ``column``) when ``t`` divides them; its logits stay split (the loss is
  assumed vocabulary-parallel too);
* the token embedding (the ``nn.Embedding`` with the most rows; position embeddings stay
  replicated) is split by rows (vocabulary-parallel, costed as ``row``: its table divided by
  ``t``, its output all-reduced forward) when ``t`` divides its rows.

Per column group the backward pass all-reduces the gradient of the group's input (bytes of the
input activation); per row layer the forward pass all-reduces its output (bytes of the output).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from milp_partition.importers.records import OpRecord

#: The roles an operator can take.
ROLES: tuple[str, ...] = ("replicated", "column", "row", "inner")


class DegreeRefused(Exception):
    """Tensor-parallel degree ``t`` cannot split this layer (e.g. heads not divisible by ``t``)."""


@dataclass(frozen=True)
class LayerSplit:
    """How one layer splits at one tensor-parallel degree.

    Attributes
    ----------
    roles
        The role of each operator (in the layer's execution order).
    allreduce_fw_bytes
        Bytes of each forward all-reduce (one per row layer), per example-input batch.
    allreduce_bw_bytes
        Bytes of each backward all-reduce (one per column group), per example-input batch.
    notes
        Why a part that could have been split was replicated.
    """

    roles: tuple[str, ...]
    allreduce_fw_bytes: tuple[float, ...] = ()
    allreduce_bw_bytes: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Unit:
    """The consecutive operators of one run of a linear module."""

    path: str
    index: tuple[int, ...]


def _units(ops: Sequence[OpRecord], modules: Mapping[str, Mapping[str, Any]]) -> list[_Unit]:
    units: list[_Unit] = []
    for i, op in enumerate(ops):
        if modules.get(op.module_path, {}).get("type") != "Linear":
            continue
        if units and units[-1].path == op.module_path and units[-1].index[-1] == i - 1:
            units[-1] = _Unit(op.module_path, (*units[-1].index, i))
        else:
            units.append(_Unit(op.module_path, (i,)))
    return units


def _inside(path: str, module: str) -> bool:
    return path == module or path.startswith(module + ".")


def _attention_of(path: str, attention: Sequence[str]) -> str | None:
    """The innermost attention module containing ``path`` (``None`` if none)."""
    best = None
    for a in attention:
        if _inside(path, a) and (best is None or len(a) > len(best)):
            best = a
    return best


def _projection_after(
    units: Sequence[_Unit], attention: Sequence[str], last: int, value: _Unit, modules: Mapping[str, Mapping[str, Any]]
) -> _Unit | None:
    """The first linear layer after an attention module (op ``last`` its last) if it reads the values' width."""
    follow = next((u for u in units if u.index[0] > last and _attention_of(u.path, attention) is None), None)
    if follow is None or modules[follow.path]["in_features"] != modules[value.path]["out_features"]:
        return None
    return follow


def _token_embedding(modules: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The embedding with the most rows (the token embedding: position and type embeddings are smaller)."""
    tables = [(int(m["num_embeddings"]), p) for p, m in modules.items() if m.get("type") == "Embedding"]
    return max(tables)[1] if tables else None


def input_activation_bytes(op: OpRecord) -> float:
    """Bytes of the activations ``op`` reads (its input bytes less the parameters it reads first)."""
    return float(max(op.input_bytes - op.param_bytes, 0))


def split_layer(
    ops: Sequence[OpRecord], modules: Mapping[str, Mapping[str, Any]], t: int, *, last_layer: bool = False
) -> LayerSplit:
    """The roles of ``ops`` (one layer, execution order) at degree ``t`` and the all-reduces they need.

    Raises
    ------
    DegreeRefused
        When an attention module's heads are not divisible by ``t``.
    """
    if t == 1:
        return LayerSplit(tuple(["replicated"] * len(ops)))
    s = _LayerSplitter(ops, modules, t)
    taken = s.split_attention()
    rest = [u for u in s.units if _attention_of(u.path, s.attention) is None and u not in taken]
    paired = s.split_mlps(rest)
    if last_layer and rest and rest[-1].path not in paired:
        head = rest[-1]
        paired.add(head.path)
        if s.feat(head, "out_features") % t == 0:
            logits = [i for i in range(head.index[-1] + 1, len(ops)) if s.roles[i] == "replicated"]
            s.split_pair([head], None, logits)
        else:
            s.notes.append(f"{head.path}: {s.feat(head, 'out_features')} outputs not divisible by {t}: replicated")
    s.split_embedding()
    alone = [u.path for u in rest if u.path not in paired]
    if alone:
        s.notes.append(
            f"linear layer{'s' if len(alone) > 1 else ''} {', '.join(alone)} without a partner in the same graph node: "
            "replicated (a coarser --layer-depth at import keeps a block's MLP in one node)"
        )
    return LayerSplit(tuple(s.roles), tuple(s.fw), tuple(s.bw), tuple(s.notes))


class _LayerSplitter:
    """:func:`split_layer`'s work in progress: each op's role and the all-reduces (forward, backward) found so far."""

    def __init__(self, ops: Sequence[OpRecord], modules: Mapping[str, Mapping[str, Any]], t: int) -> None:
        self.ops, self.modules, self.t = ops, modules, t
        self.roles = ["replicated"] * len(ops)
        self.fw: list[float] = []
        self.bw: list[float] = []
        self.notes: list[str] = []
        self.units = _units(ops, modules)
        self.in_unit = {i for u in self.units for i in u.index}
        attention = [p for p, m in modules.items() if "heads" in m and any(_inside(op.module_path, p) for op in ops)]
        attention.sort(key=lambda p: next(i for i, op in enumerate(ops) if _inside(op.module_path, p)))
        self.attention = attention

    def feat(self, u: _Unit, key: str) -> int:
        return int(self.modules[u.path][key])

    def split_pair(self, cols: Sequence[_Unit], row: _Unit | None, inner: Sequence[int]) -> None:
        """Column layers ``cols``, then the row layer ``row`` (None: none) with the ``inner`` ops between them split too."""
        ops, roles = self.ops, self.roles
        for u in cols:
            for i in u.index:
                roles[i] = "column"
        # (a unit may begin or end with a view, which moves no bytes: its largest tensor is the one reduced)
        self.bw.append(max(input_activation_bytes(ops[i]) for i in cols[0].index))
        if row is not None:
            for i in row.index:
                roles[i] = "row"
            self.fw.append(float(max(ops[i].output_bytes for i in row.index)))
        for i in inner:
            roles[i] = "inner"

    def split_attention(self) -> set[_Unit]:
        """Each attention module's projections: heads by columns, the output projection by rows; returns the latter."""
        ops, modules, t, units, attention, feat = self.ops, self.modules, self.t, self.units, self.attention, self.feat
        taken: set[_Unit] = set()  # output projections found after their attention module
        for a in attention:
            mine = [u for u in units if _attention_of(u.path, attention) == a]
            inside = [i for i, op in enumerate(ops) if _attention_of(op.module_path, attention) == a]
            core = next((i for i in inside if i not in self.in_unit and ops[i].forward_flops > 0), None)
            cols = [u for u in mine if core is not None and u.index[0] < core]
            if core is None or not cols:
                self.notes.append(f"attention {a} has no linear projections before its scores: replicated")
                continue
            for key in ("heads", "kv_heads"):
                count = modules[a].get(key)
                if count is not None and int(count) % t:
                    raise DegreeRefused(f"attention {a} has {count} {key.replace('_', ' ')}, not divisible by {t}")
            after = [u for u in mine if u.index[0] > core]
            row = after[-1] if after else _projection_after(units, attention, inside[-1], cols[-1], modules)
            if row is None:
                self.notes.append(f"attention {a}: no output projection found: replicated")
                continue
            if any(feat(u, "out_features") % t for u in cols) or feat(row, "in_features") % t:
                self.notes.append(f"attention {a}: projection widths not divisible by {t}: replicated")
                continue
            start, stop = cols[0].index[0], row.index[0]
            inner = [i for i in range(start, stop) if i not in self.in_unit and _attention_of(ops[i].module_path, attention) == a]
            self.split_pair(cols, row, inner)
            taken.add(row)
        return taken

    def split_mlps(self, rest: list[_Unit]) -> set[str]:
        """MLPs among the linear layers outside attention (d -> h columns, then h -> d rows); returns the paths paired."""
        t, feat = self.t, self.feat
        pending: list[_Unit] = []
        paired: set[str] = set()
        for u in rest:
            # an MLP maps width d to a hidden width and back: column layers d -> h, then a row layer h -> d
            if pending and (feat(u, "in_features"), feat(u, "out_features")) == (
                feat(pending[-1], "out_features"),
                feat(pending[0], "in_features"),
            ):
                hidden = feat(pending[0], "out_features")
                if hidden % t:
                    self.notes.append(f"{pending[0].path} -> {u.path}: hidden width {hidden} not divisible by {t}: replicated")
                else:
                    start, stop = pending[0].index[0], u.index[0]
                    inner = [i for i in range(start, stop) if i not in self.in_unit and self.roles[i] == "replicated"]
                    self.split_pair(pending, u, inner)
                paired.update(p.path for p in (*pending, u))
                pending = []
            elif pending and (feat(u, "in_features"), feat(u, "out_features")) == (
                feat(pending[0], "in_features"),
                feat(pending[0], "out_features"),
            ):
                pending.append(u)
            else:
                pending = [u]
        return paired

    def split_embedding(self) -> None:
        """The token embedding's table by rows (vocabulary), when its rows divide by t."""
        ops, modules, t = self.ops, self.modules, self.t
        vocab = _token_embedding(modules)
        table = [i for i, op in enumerate(ops) if vocab is not None and op.module_path == vocab]
        if table:
            rows = int(modules[str(vocab)]["num_embeddings"])
            if rows % t == 0:
                for i in table:
                    self.roles[i] = "row"
                self.fw.append(float(max(ops[i].output_bytes for i in table)))
            else:
                self.notes.append(f"embedding {vocab}: {rows} rows not divisible by {t}: replicated")


def _div(nbytes: int, t: int) -> int:
    return math.ceil(nbytes / t)


def scaled_op(op: OpRecord, role: str, t: int) -> OpRecord:
    """``op`` as one of ``t`` devices runs it in ``role`` (see the module docstring)."""
    if role == "replicated" or t == 1:
        return op
    bwd = None if op.backward_flops is None else op.backward_flops / t
    saved = op.saved_bytes
    if role == "column":
        activation_in = op.input_bytes - op.param_bytes
        return replace(
            op,
            forward_flops=op.forward_flops / t,
            backward_flops=bwd,
            input_bytes=max(activation_in, 0) + _div(op.param_bytes, t),
            output_bytes=_div(op.output_bytes, t),
            param_bytes=_div(op.param_bytes, t),
        )
    if role == "row":
        return replace(
            op,
            forward_flops=op.forward_flops / t,
            backward_flops=bwd,
            input_bytes=_div(op.input_bytes, t),
            param_bytes=_div(op.param_bytes, t),
            saved_bytes=None if saved is None else _div(saved, t),
        )
    if role == "inner":
        return replace(
            op,
            forward_flops=op.forward_flops / t,
            backward_flops=bwd,
            input_bytes=_div(op.input_bytes, t),
            output_bytes=_div(op.output_bytes, t),
            param_bytes=_div(op.param_bytes, t),
            saved_bytes=None if saved is None else _div(saved, t),
        )
    raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
