"""Hugging Face models from a config alone (``milp-partition import hf CONFIG``), built on the meta device.

``CONFIG`` is a config JSON file (a model's ``config.json``, or a folder holding one) or a model
type that ``transformers`` knows without the network (``gpt2``, ``bert``, ``llama``, ...: the
library's default config of that type).  Nothing is downloaded: a hub name such as
``meta-llama/Llama-2-7b-hf`` is refused with a message asking for its config JSON.  The model is
built under ``torch.device("meta")``: shapes only, no weights, so a 70 B-parameter model costs no
memory.  Needs the ``zoo`` extra (``transformers``) and ``torch``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.importers.deps import require

#: Config fields that give the number of positions a model's position embedding has.
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx")
#: Names of inputs whose last dimension is the sequence length.
SEQUENCE_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "decoder_input_ids")


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (``--set``) as config fields; a value is read as JSON (``2``, ``true``), else kept as text."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise InputError(f"expected KEY=VALUE with KEY a config field, got {item!r}", where="--set")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def load_config(spec: str, overrides: Mapping[str, Any] | None = None) -> Any:
    """The ``transformers`` config of ``spec`` (a config JSON file or folder, or a model type), with ``overrides``."""
    t = require("transformers")
    mapping = t.models.auto.configuration_auto.CONFIG_MAPPING
    path = Path(spec)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"not a readable config JSON: {exc}", source=str(path)) from None
        if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
            raise InputError("a Hugging Face config JSON needs a 'model_type' field (e.g. \"gpt2\")", source=str(path))
        model_type = data.pop("model_type")
        if model_type not in mapping:
            raise InputError(f"model_type {model_type!r} is unknown to transformers {t.__version__}", source=str(path))
        return checked_config(t, model_type, data, overrides or {}, str(path))
    if spec in mapping:
        return checked_config(t, spec, {}, overrides or {}, "")
    raise InputError(
        f"{spec!r} is neither a config JSON file nor a model type transformers knows without the network "
        "(e.g. gpt2, bert, llama, t5); a hub model name would need a download, which this command never does: "
        "pass the model's config.json instead",
        where="config",
    )


#: The largest value a size field of a config may take (a vocabulary of 2**62 rows is no model).
MAX_CONFIG_SIZE = 2**31 - 1
#: Config fields that are sizes or counts (layers, heads, widths, vocabulary, positions), by name.
_SIZE_FIELD = re.compile(r"^(n_|num_|d_)|(_size|_dim|_layers|_heads|_positions|_embd|_ctx|_ff|_kv)$")


def checked_config(t: Any, model_type: str, data: Mapping[str, Any], overrides: Mapping[str, Any], source: str) -> Any:
    """The config of ``model_type`` from a file's ``data`` and ``--set`` ``overrides``, checked before a model is built.

    A ``--set`` key the type does not have is refused (a typo would be ignored: ``n_layerr=2`` imported 12 layers);
    every size field (layers, heads, widths, vocabulary: a positive integer in the type's default config) must be an
    integer from 1 to :data:`MAX_CONFIG_SIZE`; the key/value heads must divide the attention heads.
    """
    default = t.AutoConfig.for_model(model_type)
    aliases = dict(getattr(default, "attribute_map", {}) or {})
    known = set(default.to_dict()) | set(aliases)
    for key in overrides:
        if key not in known and not hasattr(default, key):
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"{model_type} configs have no field {key!r}{hint}", where=f"--set {key}")
    defaults = default.to_dict()
    for given, where in ((overrides, "--set"), (data, "field")):
        for key, value in given.items():
            name = aliases.get(key, key)
            if not _is_size_field(name, defaults.get(name)):
                continue
            if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONFIG_SIZE):
                raise InputError(
                    f"{key} must be a whole number from 1 to {MAX_CONFIG_SIZE}, got {value!r}",
                    source=source or None if where == "field" else None,
                    where=f"--set {key}" if where == "--set" else f"field {key!r}",
                )
    try:
        config = t.AutoConfig.for_model(model_type, **{**data, **overrides})
    except (ValueError, TypeError) as exc:
        raise InputError(f"transformers refuses this {model_type} config: {exc}", source=source or None, where="config") from None
    heads, kv = getattr(config, "num_attention_heads", None), getattr(config, "num_key_value_heads", None)
    if isinstance(heads, int) and isinstance(kv, int) and kv > 0 and heads % kv:
        raise InputError(
            f"num_key_value_heads {kv} must divide num_attention_heads {heads} (each key/value head serves a group of "
            "query heads)",
            source=source or None,
            where="config",
        )
    return config


def _is_size_field(name: str, default: Any) -> bool:
    """Whether ``name`` is a size or count field: its default is a positive integer and its name says so."""
    if not (isinstance(default, int) and not isinstance(default, bool) and default > 0) or "token" in name:
        return False
    return bool(_SIZE_FIELD.search(name)) or name in ("vocab_size", "hidden_size", "intermediate_size")


def build_meta_model(config: Any) -> Any:
    """The model of ``config`` built on the meta device (no weights): its ``architectures[0]`` class, else an LM head or the base model."""
    t = require("transformers")
    torch = require("torch")
    candidates: list[Any] = []
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(t, str(arch), None)
        if cls is not None:
            candidates.append(cls)
    autos = ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForSeq2SeqLM", "AutoModel")
    candidates += [getattr(t, name) for name in autos if hasattr(t, name)]
    errors = []
    for cls in candidates:
        try:
            with torch.device("meta"):
                return cls.from_config(config) if cls.__name__.startswith("Auto") else cls(config)
        except (ValueError, KeyError, TypeError) as exc:  # this head does not exist for the config's type
            errors.append(f"{cls.__name__}: {exc}")
    raise InputError(f"no model class builds config type {config.model_type!r}: " + "; ".join(errors[:2]), where="config")


def max_positions(config: Any) -> tuple[int, str] | None:
    """The number of positions of the model's position embedding and the config field that gives it, if it has one."""
    for name in POSITION_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, name
    return None


def position_warnings(model: Any, specs: Sequence[Any]) -> list[str]:
    """One line per token input longer than the model's positions (the import still counts it)."""
    config = getattr(model, "config", None)
    found = max_positions(config) if config is not None else None
    if found is None:
        return []
    limit, field = found
    out = []
    for k, spec in enumerate(specs):
        integer = spec.dtype is not None and "int" in str(spec.dtype)
        named = spec.name in SEQUENCE_INPUTS if spec.name else integer
        if named and len(spec.shape) >= 2 and spec.shape[-1] > limit:
            out.append(
                f"input {spec.name or k + 1} has {spec.shape[-1]} tokens, more than the model's {limit} positions "
                f"(config.{field}): the real model fails or must extrapolate; the import counts the longer sequence"
            )
    return out
