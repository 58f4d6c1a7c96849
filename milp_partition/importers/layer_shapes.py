"""Layer shapes for tensor-parallel planning: what an imported graph file records beside its nodes.

A graph file written by ``milp-partition import`` carries, besides its nodes and edges, a
top-level ``layers`` object (format ``milp-partition-layers/1``, documented in
``docs/FORMAT.md``) from which :mod:`milp_partition.joint.layers` builds a joint problem:

* ``batch_size``: samples in the example input (its first dimension);
* ``dtype``, ``profile``, ``backward_flops_ratio``, ``backward_bytes_ratio``,
  ``optimizer_state_bytes_per_param_byte``: the import settings the costs were made with;
* ``modules``: module path -> shape facts (``{"type": "Linear", "in_features", "out_features"}``,
  ``{"type": "Embedding", "num_embeddings", "embedding_dim"}``, ``{"type": ..., "heads": h}`` for an
  attention module, with ``"kv_heads"`` for grouped-query attention);
* ``ops``: every captured operator in execution order with its graph node (``node``) and its
  FLOPs and bytes (the fields of :class:`~milp_partition.importers.records.OpRecord`).

Readers that do not know the object ignore it (the native reader accepts it and drops it).
"""

from __future__ import annotations

from typing import Any

from milp_partition.importers.deps import require
from milp_partition.importers.grouping import group_operators

#: Value of the ``format`` field of the ``layers`` object.
LAYERS_FORMAT = "milp-partition-layers/1"

#: Attribute names under which attention modules keep their head count (PyTorch, Hugging Face, GPT-style code).
HEAD_ATTRIBUTES: tuple[str, ...] = ("heads", "num_heads", "n_head", "n_heads", "num_attention_heads")

#: Attribute names of the key/value head count of grouped-query attention (its module or its ``config``).
KV_HEAD_ATTRIBUTES: tuple[str, ...] = ("num_key_value_heads", "num_kv_heads", "n_kv_heads")

#: The OpRecord fields written per operator.
OP_FIELDS: tuple[str, ...] = (
    "id",
    "op_type",
    "module_path",
    "forward_flops",
    "backward_flops",
    "input_bytes",
    "output_bytes",
    "param_bytes",
    "buffer_bytes",
    "saved_bytes",
)


def module_shapes(module: Any) -> dict[str, dict[str, Any]]:
    """Module path -> shape facts for every ``nn.Linear`` (and Hugging Face ``Conv1D``), ``nn.Embedding`` and attention module.

    An attention module is one with an integer head count under one of :data:`HEAD_ATTRIBUTES`
    (``nn.MultiheadAttention.num_heads``, ``GPT2Attention.num_heads``, ...), or one whose class name
    contains "Attention", with linear children, whose ``config`` has the count (Hugging Face Llama).
    """
    torch = require("torch")
    out: dict[str, dict[str, Any]] = {}
    for path, m in module.named_modules():
        if isinstance(m, torch.nn.Linear):
            out[path] = {"type": "Linear", "in_features": int(m.in_features), "out_features": int(m.out_features)}
        elif type(m).__name__ == "Conv1D" and isinstance(getattr(m, "nf", None), int) and getattr(m, "weight", None) is not None:
            # Hugging Face GPT-2's linear layer: weight (in, out), out = nf
            out[path] = {"type": "Linear", "in_features": int(m.weight.shape[0]), "out_features": int(m.nf)}
        elif isinstance(m, torch.nn.Embedding):
            out[path] = {"type": "Embedding", "num_embeddings": int(m.num_embeddings), "embedding_dim": int(m.embedding_dim)}
        else:
            config = getattr(m, "config", None)
            heads = _count(m, HEAD_ATTRIBUTES)
            if (
                heads is None
                and "attention" in type(m).__name__.lower()
                and any(isinstance(c, torch.nn.Linear) for c in m.children())
            ):
                heads = _count(config, HEAD_ATTRIBUTES)  # e.g. Hugging Face Llama: the count is in the config only
            if heads is not None:
                out[path] = {"type": type(m).__name__, "heads": heads}
                kv = _count(m, KV_HEAD_ATTRIBUTES) or _count(config, KV_HEAD_ATTRIBUTES)
                if kv is not None:
                    out[path]["kv_heads"] = kv
    return out


def _count(owner: Any, names: tuple[str, ...]) -> int | None:
    """The first positive integer attribute of ``owner`` among ``names`` (``None`` if none)."""
    for attr in names:
        value = getattr(owner, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def layers_section(imported: Any) -> dict[str, Any]:
    """The ``layers`` object of an :class:`~milp_partition.importers.build.ImportedGraph` (see the module docstring)."""
    captured, settings, meta = imported.captured, imported.settings, imported.metadata
    depth = meta.get("layer_depth") or 1
    node_of = {op.id: gid for gid, ops in group_operators(captured.ops, settings.granularity, depth) for op in ops}
    return {
        "format": LAYERS_FORMAT,
        "batch_size": captured.batch_size,
        "dtype": settings.dtype,
        "profile": settings.profile,
        "backward_flops_ratio": settings.backward_flops_ratio,
        "backward_bytes_ratio": settings.backward_bytes_ratio,
        "optimizer_state_bytes_per_param_byte": settings.optimizer_state_bytes_per_param_byte,
        "modules": dict(captured.module_shapes),
        "ops": [{"node": node_of[op.id], **{f: getattr(op, f) for f in OP_FIELDS}} for op in captured.ops],
        # how to build the model again (``milp-partition run``): MODULE:FACTORY and the --input specs, when known
        **({"model": dict(meta["model"])} if meta.get("model") else {}),
    }
