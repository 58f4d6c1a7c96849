"""Reader of Sailor's benchmark folder (eth-easl/sailor's profiles, cluster traces and network fits).

The folder (``../shared/benchmarks/hetero``) holds ``models/profiles_tmp.json`` (per model, kind, micro-batch
size and tp: per-layer forward, backward and update seconds), ``models/llm_info.json`` (per model and tp:
parameter, activation and output floats per layer), ``models/training_config_*.json`` (layers, optimizer,
default global batch), ``clusters/basic_cluster_config.json`` (devices per node), ``clusters/*.csv`` (trace
rows: devices per ``<kind>_<zone>``), ``network/multizone_bandwidths_het.json`` (link fits between
(zone, kind, count) ends) and ``reference/settings.json`` (named settings: model, global batch, devices per
column).  A setting comes from ``--setting NAME`` (a name in ``reference/settings.json``), ``--setting-file``
(a JSON object in that format, or ``{"settings": [...]}`` with one entry) or a trace row (``--trace CSV --row N``
with ``--model``).  Every error names the file and the field (:class:`~milp_partition.errors.InputError`).

Device memory is the simulator's ``GPU_MEMORY_GB`` (``sailor/Planner/simulations/constants.py``), in GiB:
:data:`GPU_MEMORY_GIB`; ``mem_per_gpu`` of ``basic_cluster_config.json`` is the planners' figure, not the one
the simulator checks.

The links are the between-node fits of ``multizone_bandwidths_het.json`` (``Cluster.link_fits``).  The folder's
within-node figures, ``network/intra_node_bandwidths.json`` (a bandwidth fit and a peak per kind and GPU count),
are not read: the one cluster's ``node_link`` is one alpha-beta link for every kind, which a per-kind fit does not
fill, and Sailor's simulator does not use them in its time (a tensor-parallel replica's time is its profile's, per
tp).  The folder gives no compute profile (``peak_flops_per_s`` stays ``None``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from milp_partition.cluster import Cluster, DeviceKind, KindColumn, LinkFit, LinkKey, kinds_cluster
from milp_partition.errors import InputError
from milp_partition.hetero.problem import HeteroModel, HeteroProblem, Objective

#: The simulator's memory per device kind, GiB (``GPU_MEMORY_GB`` of Sailor's ``simulations/constants.py``).
GPU_MEMORY_GIB = {"V100-16": 16, "A100-40": 40, "A100-80": 80, "GH-96": 96, "Titan-RTX": 24, "RTX-2080": 11, "RTX-3090": 24}
#: Training configuration file per model (``models/``).
TRAINING_CONFIGS = {"OPT-350": "training_config_opt_350.json", "GPT-Neo-2.7": "training_config_gpt_neo27.json"}
PROFILES = "models/profiles_tmp.json"
LLM_INFO = "models/llm_info.json"
NODES = "clusters/basic_cluster_config.json"
FITS = "network/multizone_bandwidths_het.json"
SETTINGS = "reference/settings.json"


def looks_like_sailor(folder: Path) -> bool:
    """Whether ``folder`` is Sailor's benchmark folder (its profiles and network fits are there)."""
    return folder.is_dir() and (folder / PROFILES).is_file() and (folder / FITS).is_file()


def _load(folder: Path, rel: str) -> Any:
    path = folder / rel
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("file not found; is this Sailor's benchmark folder?", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", source=str(path)) from None


def _obj(value: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"expected an object, got {type(value).__name__}", source=source, where=where)
    return value


def _num(value: Any, source: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InputError(f"expected a number, got {value!r}", source=source, where=where)
    return float(value)


def read_model(folder: Path, model: str) -> HeteroModel:
    """Profiles, memory and sizes of ``model`` from the folder."""
    src_p, src_i = str(folder / PROFILES), str(folder / LLM_INFO)
    profiles = _obj(_load(folder, PROFILES), src_p, "top level")
    if model not in profiles:
        raise InputError(f"no model {model!r}; known: {', '.join(sorted(profiles))}", source=src_p, where="model")
    info_all = _obj(_load(folder, LLM_INFO), src_i, "top level")
    if model not in info_all:
        raise InputError(f"no model {model!r}; known: {', '.join(sorted(info_all))}", source=src_i, where="model")
    if model not in TRAINING_CONFIGS:
        raise InputError(f"no training configuration for {model!r}; known: {', '.join(sorted(TRAINING_CONFIGS))}", where="model")
    tc_rel = "models/" + TRAINING_CONFIGS[model]
    tc = _obj(_load(folder, tc_rel), str(folder / tc_rel), "top level")
    try:
        layers = int(tc["num_all_layers"])
        num_layers = int(tc["num_layers"])
        optimizer = str(tc.get("optimizer", "Adam"))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"needs integer num_all_layers and num_layers ({exc})", source=str(folder / tc_rel)) from None
    times: dict[tuple[str, int, int], tuple[tuple[float, float, float], ...]] = {}
    mbs_keys: dict[str, tuple[int, ...]] = {}
    for kind, per_mbs in _obj(profiles[model], src_p, model).items():
        keys = []
        for mbs_s, per_tp in _obj(per_mbs, src_p, f"{model}.{kind}").items():
            mbs = int(mbs_s)
            keys.append(mbs)
            for tp_s, per_layer in _obj(per_tp, src_p, f"{model}.{kind}.{mbs_s}").items():
                where = f"{model}.{kind}.{mbs_s}.{tp_s}"
                rows = list(_obj(per_layer, src_p, where).values())
                if len(rows) != layers:
                    raise InputError(f"{len(rows)} layers, the model has {layers}", source=src_p, where=where)
                vals = []
                for j, r in enumerate(rows):
                    if not isinstance(r, list) or len(r) < 3:
                        raise InputError("expected [forward, backward, update] seconds", source=src_p, where=f"{where} layer {j}")
                    vals.append((_num(r[0], src_p, where), _num(r[1], src_p, where), _num(r[2], src_p, where)))
                times[(kind, mbs, int(tp_s))] = tuple(vals)
        mbs_keys[kind] = tuple(sorted(keys))
    info = _obj(info_all[model], src_i, model)
    params: dict[int, tuple[float, ...]] = {}
    act: dict[int, tuple[float, ...]] = {}
    for tp_s, per_layer in info.items():
        per_layer = _obj(per_layer, src_i, f"{model}.{tp_s}")
        try:
            params[int(tp_s)] = tuple(
                _num(per_layer[str(j)]["params_floats"], src_i, f"{model}.{tp_s}.{j}") for j in range(layers)
            )
            act[int(tp_s)] = tuple(_num(per_layer[str(j)]["act_mem_floats"], src_i, f"{model}.{tp_s}.{j}") for j in range(layers))
        except (KeyError, TypeError) as exc:
            raise InputError(f"missing layer or field {exc}", source=src_i, where=f"{model}.{tp_s}") from None
    if 1 not in params:
        raise InputError("needs the tp 1 entry (sends and all-reduces read it)", source=src_i, where=model)
    out = tuple(_num(info["1"][str(j)]["act_output_floats"], src_i, f"{model}.1.{j}") for j in range(layers))
    return HeteroModel(model, layers, num_layers, 20 if optimizer.lower() == "sgd" else 24, times, mbs_keys, params, act, out)


def read_links(folder: Path, kinds: set[str], zones: set[str]) -> dict[LinkKey, LinkFit]:
    """The network fits between the given kinds and zones."""
    src = str(folder / FITS)
    data = _obj(_load(folder, FITS), src, "top level")
    links: dict[LinkKey, LinkFit] = {}
    for zs, per_kind in data.items():
        if zs not in zones:
            continue
        for ks, per_count in _obj(per_kind, src, zs).items():
            if ks not in kinds:
                continue
            for cs, per_zone in _obj(per_count, src, f"{zs}.{ks}").items():
                for zr, per_kind_r in _obj(per_zone, src, f"{zs}.{ks}.{cs}").items():
                    if zr not in zones:
                        continue
                    for kr, per_count_r in _obj(per_kind_r, src, f"{zs}.{ks}.{cs}.{zr}").items():
                        if kr not in kinds:
                            continue
                        for cr, fit in _obj(per_count_r, src, f"{zs}.{ks}.{cs}.{zr}.{kr}").items():
                            where = f"{zs}.{ks}.{cs}.{zr}.{kr}.{cr}"
                            if not isinstance(fit, list) or not fit or not isinstance(fit[0], list):
                                raise InputError("expected [[k2, k1, k0], peak]", source=src, where=where)
                            links[(zs, ks, int(cs), zr, kr, int(cr))] = LinkFit(tuple(_num(c, src, where) for c in fit[0]))
    return links


def _check_zones(folder: Path, cols: list[tuple[str, str, int]], links: dict[LinkKey, LinkFit], source: str) -> None:
    """:class:`InputError` naming the column whose zone has no network fit for its kind (the search would only
    fail later, at the first link it prices, without naming the setting)."""
    have = {(zs, ks) for zs, ks, _cs, _zr, _kr, _cr in links}
    for kind, zone, _n in cols:
        if (zone, kind) not in have:
            data = _load(folder, FITS)
            known = sorted(z for z, per_kind in data.items() if isinstance(per_kind, dict) and kind in per_kind)
            raise InputError(
                f"no network fit for {kind} in zone {zone!r} in {FITS}; zones with {kind} fits: {', '.join(known) or 'none'}",
                source=source,
                where=f"gpus.{kind}_{zone}",
            )


def read_nodes(folder: Path) -> dict[str, int]:
    """Devices per node, per kind (``basic_cluster_config.json``)."""
    src = str(folder / NODES)
    data = _obj(_load(folder, NODES), src, "top level")
    out = {}
    for k, v in data.items():
        if isinstance(v, dict):
            if "gpus_per_node" not in v:
                raise InputError("missing gpus_per_node", source=src, where=k)
            out[k] = int(_num(v["gpus_per_node"], src, f"{k}.gpus_per_node"))
    return out


def parse_columns(gpus: Any, source: str, where: str = "gpus") -> list[tuple[str, str, int]]:
    """``{"<kind>_<zone>": count}`` -> (kind, zone, count) triples."""
    if not isinstance(gpus, dict) or not gpus:
        raise InputError("expected a non-empty object '<kind>_<zone>': count", source=source, where=where)
    out = []
    for label, n in gpus.items():
        kind, sep, zone = str(label).partition("_")
        if not sep or not kind or not zone:
            raise InputError(
                f"column {label!r} is not '<kind>_<zone>' (e.g. 'A100-40_us-central1-a')", source=source, where=where
            )
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"the count must be a whole number >= 0, got {n!r}", source=source, where=f"{where}.{label}")
        out.append((kind, zone, n))
    return out


def read_setting_file(path: Path, name: str | None = None) -> dict[str, Any]:
    """One setting from a file: a setting object, or ``{"settings": [...]}`` (by ``name``, or its only entry)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", source=str(path)) from None
    src = str(path)
    if isinstance(data, dict) and "settings" in data:
        items = data["settings"]
        if not isinstance(items, list) or not items:
            raise InputError("expected a non-empty list", source=src, where="settings")
        if name is None:
            if len(items) != 1:
                names = [s.get("name") for s in items if isinstance(s, dict)]
                raise InputError(
                    f"{len(items)} settings; name one with --setting ({', '.join(map(str, names))})", source=src, where="settings"
                )
            return _obj(items[0], src, "settings[0]")
        for s in items:
            if isinstance(s, dict) and s.get("name") == name:
                return s
        names = [s.get("name") for s in items if isinstance(s, dict)]
        raise InputError(f"no setting {name!r}; known: {', '.join(map(str, names))}", source=src, where="--setting")
    return _obj(data, src, "top level")


def read_trace_row(path: Path, row: int) -> dict[str, int]:
    """Devices per column of one row of a Sailor trace CSV (index, Timestamp, then ``<kind>_<zone>`` columns)."""
    src = str(path)
    try:
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
    except FileNotFoundError:
        raise InputError("file not found", source=src) from None
    if len(rows) < 2:
        raise InputError("no data rows", source=src)
    head = rows[0]
    if len(head) < 3 or head[1] != "Timestamp":
        raise InputError("expected the header ',Timestamp,<kind>_<zone>,...'", source=src, where="header")
    if not 0 <= row < len(rows) - 1:
        raise InputError(f"row {row} does not exist (rows 0..{len(rows) - 2})", source=src, where="--row")
    vals = rows[row + 1]
    out = {}
    for label, v in zip(head[2:], vals[2:]):
        try:
            out[label] = int(float(v))
        except ValueError:
            raise InputError(f"count {v!r} is not a number", source=src, where=f"row {row}, column {label}") from None
    return out


def build_problem(
    folder: Path, setting: dict[str, Any], *, source: str, objective: Objective = "sailor", global_batch: int | None = None
) -> HeteroProblem:
    """The problem of one setting (``model``, ``global_batch``, ``gpus``) on the folder's data."""
    folder = Path(folder)
    model_name = setting.get("model")
    if not isinstance(model_name, str):
        raise InputError(f"expected a model name, got {model_name!r}", source=source, where="model")
    cols = parse_columns(setting.get("gpus"), source)
    model = read_model(folder, model_name)
    nodes = read_nodes(folder)
    kinds: dict[str, DeviceKind] = {}
    for kind, _zone, _n in cols:
        if kind not in GPU_MEMORY_GIB:
            raise InputError(
                f"no simulator memory for kind {kind!r}; known: {', '.join(sorted(GPU_MEMORY_GIB))}",
                source=source,
                where=f"gpus.{kind}",
            )
        if kind not in nodes:
            raise InputError(f"kind {kind!r} is not in {NODES}", source=source, where=f"gpus.{kind}")
        kinds[kind] = DeviceKind(kind, GPU_MEMORY_GIB[kind] * 2**30, nodes[kind])
    links = read_links(folder, set(kinds), {z for _k, z, _n in cols})
    _check_zones(folder, cols, links, source)
    cluster = kinds_cluster(kinds, [KindColumn(k, z, n) for k, z, n in cols], links, source=source)
    gb = global_batch if global_batch is not None else setting.get("global_batch")
    if gb is None:
        tc = _load(folder, "models/" + TRAINING_CONFIGS[model_name])
        gb = tc.get("global_batch_size")
    if isinstance(gb, bool) or not isinstance(gb, int) or gb < 1:
        raise InputError(f"the global batch must be a whole number >= 1, got {gb!r}", source=source, where="global_batch")
    return HeteroProblem(model, cluster, gb, objective, str(setting.get("name", "")), source)


def read_sailor(
    folder: Path,
    *,
    setting: str | None = None,
    setting_file: Path | None = None,
    trace: Path | None = None,
    row: int | None = None,
    model: str | None = None,
    global_batch: int | None = None,
    objective: Objective = "sailor",
) -> HeteroProblem:
    """The problem of a setting: by name (``reference/settings.json``), from a setting file, or a trace row + model."""
    folder = Path(folder)
    if not looks_like_sailor(folder):
        raise InputError(f"not Sailor's benchmark folder (needs {PROFILES} and {FITS})", source=str(folder))
    if trace is not None:
        if setting is not None or setting_file is not None:
            raise InputError("give a trace row or a setting, not both", where="--trace")
        if model is None:
            raise InputError("a trace row needs --model (e.g. OPT-350)", where="--trace")
        gpus = read_trace_row(trace, row if row is not None else 0)
        name = f"{Path(trace).name} row {row if row is not None else 0}"
        return build_problem(
            folder,
            {"name": name, "model": model, "gpus": gpus},
            source=str(trace),
            objective=objective,
            global_batch=global_batch,
        )
    if setting_file is not None:
        s = read_setting_file(setting_file, setting)
        return build_problem(folder, s, source=str(setting_file), objective=objective, global_batch=global_batch)
    if setting is None:
        raise InputError(
            "name a setting: --setting NAME (in reference/settings.json), --setting-file FILE, or --trace CSV --row N --model M",
            source=str(folder),
        )
    s = read_setting_file(folder / SETTINGS, setting)
    if model is not None and model != s.get("model"):
        raise InputError(f"setting {setting!r} is for {s.get('model')!r}", where="--model")
    return build_problem(folder, s, source=str(folder / SETTINGS), objective=objective, global_batch=global_batch)


def setting_names(folder: Path) -> list[str]:
    """Names in ``reference/settings.json`` (empty when there is none)."""
    path = Path(folder) / SETTINGS
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    return [str(s.get("name")) for s in data.get("settings", []) if isinstance(s, dict)]


def describe(problem: HeteroProblem) -> list[str]:
    """Lines describing a setting (for ``info``)."""
    c: Cluster = problem.cluster
    m = problem.model
    lines = [
        f"setting     {problem.setting or '(unnamed)'} from {problem.source}",
        f"model       {m.name}: {m.layers} layers, global batch {problem.global_batch}, objective {problem.objective}",
    ]
    for col in c.columns:
        k = c.kinds[col.kind]
        tps = sorted({(b, t) for (g, b, t) in m.times if g == col.kind and problem.replica_valid(g, b, t)})
        lines.append(
            f"column      {col.label}: {col.count} devices, {c.memory_of(col.kind) / 2**30:.0f} GiB, {k.devices_per_node} per node; "
            f"profiled (mbs, tp): {', '.join(f'({b},{t})' for b, t in tps)}"
        )
    lines.append(f"network     {len(c.link_fits)} link fits between the columns' (zone, kind, count) ends")
    return lines
