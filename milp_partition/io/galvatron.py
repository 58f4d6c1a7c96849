"""Reader of Galvatron's profile folders: a model folder (computation + memory profile JSON) and a hardware folder.

A model folder holds ``computation_profiling_bf16_<model>_all.json`` and ``memory_profiling_bf16_<model>_all.json``
as Galvatron's profiler writes them; the hardware folder ``allreduce_bandwidth_<n>nodes_<g>gpus_per_node.json``,
``p2p_bandwidth_...``, ``sp_time_...`` and ``overlap_coefficient.json``.  Galvatron's fits are redone here
(least squares, as its ``curve_fit`` calls compute them): forward time per layer type against the batch size
("batch" mode: the profile has several batch sizes at one sequence length) or against the sequence length at
batch 1 ("sequence" mode, quadratic; the vocabulary linear); collective latencies against the message size.

The profiles do not say the hidden size or the layer counts: :data:`KNOWN_MODELS` has them for the models
Galvatron ships (Llama-2-7B, BERT-large, T5-3B); others take ``hidden``/``layers`` from the caller.
Every error names the file and the field (:class:`~milp_partition.errors.InputError`, exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from milp_partition.cluster import Cluster, CollectiveTables, LatencyTable, Link
from milp_partition.errors import InputError
from milp_partition.galvatron.problem import (
    BYTES_PER_ELEMENT,
    MB,
    GalvatronProblem,
    LayerType,
    Vocab,
    VocabStates,
    galvatron_cluster,
)
from milp_partition.io.json_text import parse_json, read_text_file, to_float

#: model name (as in the profile file names) -> hidden size, layers per type, default sequence length.
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "llama2-7b": {"hidden": 4096, "layers": (32,), "seq": 2048},
    "bert-large": {"hidden": 1024, "layers": (24,), "seq": 512},
    "t5-3B": {"hidden": 1024, "layers": (24, 24), "seq": 512},
}

#: Largest global batch accepted (2**31 samples): the search enumerates its divisors as chunk counts.
MAX_GLOBAL_BATCH = 2**31
_COMP = re.compile(r"^computation_profiling_bf16_(?P<name>.+)_all\.json$")
#: Largest profiled figure accepted: 2**24 MB (16 TiB) of memory, 10**9 ms of time, 10**9 GB/s of bandwidth; larger
#: is a unit mistake.  With :data:`MAX_GLOBAL_BATCH` a layer's memory (figure x samples x in-flight micro-batches)
#: stays below 2**58 MB, exact in the search's 64-bit integers.
MAX_MB = 2**24
MAX_MS = 1e9
MAX_GBPS = 1e9


def looks_like_galvatron(path: Path) -> bool:
    """Whether ``path`` is a folder holding a Galvatron computation or memory profile (one missing is reported by
    :func:`profile_files`, naming the file)."""
    p = Path(path)
    try:
        return p.is_dir() and any(_COMP.match(f.name) or f.name.startswith("memory_profiling_bf16_") for f in p.iterdir())
    except OSError:
        return False


def _load(path: Path) -> Any:
    return parse_json(read_text_file(path), str(path))


def _object(value: Any, source: str, where: str | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {type(value).__name__}", source=source, where=where)
    return value


def number(value: Any, source: str, where: str, *, unit: str, cap: float, positive: bool = False) -> float:
    """A finite number in ``[0, cap]`` (``(0, cap]`` with ``positive``): never NaN, infinity, a bool or a string."""
    x = to_float(value, where, source, expected=f"a number ({unit})")
    if x < 0 or (positive and x == 0):
        raise InputError(
            f"must be {'positive' if positive else 'non-negative'} ({unit}), got {value!r}", source=source, where=where
        )
    if x > cap:
        raise InputError(f"is too large ({value!r} {unit}; at most {cap:g}): check its unit", source=source, where=where)
    return x


def profile_files(folder: Path) -> tuple[str, Path, Path]:
    """(model name, computation file, memory file) of a model folder; the plain ``<name>_all`` pair is preferred."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder; give a Galvatron model profile folder", source=str(folder))
    names = sorted(m.group("name") for f in folder.iterdir() if (m := _COMP.match(f.name)))
    missing = []
    for name in sorted(names, key=lambda n: ("seqlen" in n, len(n))):
        comp = folder / f"computation_profiling_bf16_{name}_all.json"
        mem = folder / f"memory_profiling_bf16_{name}_all.json"
        if not any(k.startswith("layertype_0_") for k in _object(_load(comp), str(comp))):
            continue
        if mem.is_file():
            return name, comp, mem
        missing.append(mem.name)
    if missing:
        raise InputError(f"missing {missing[0]} (the memory profile beside its computation profile)", source=str(folder))
    raise InputError(
        "no computation_profiling_bf16_<model>_all.json with layertype_0_ keys and its memory_profiling_bf16_<model>_all.json",
        source=str(folder),
    )


def layer_type_count(folder: Path) -> int:
    """How many layer types (``layertype_<i>_sp`` entries) the folder's memory profile has."""
    _, _, mem_path = profile_files(Path(folder))
    mem = _object(_load(mem_path), str(mem_path))
    return sum(1 for k in mem if re.match(r"^layertype_\d+_sp$", k))


def _fit(xs: list[float], ys: list[float], degree: int, source: str, what: str) -> list[float]:
    if len(xs) < degree + 1:
        raise InputError(f"{what}: {len(xs)} profiled points, need at least {degree + 1} for the fit", source=source)
    a = np.vander(np.asarray(xs, dtype=float), degree + 1)
    coef, *_ = np.linalg.lstsq(a, np.asarray(ys, dtype=float), rcond=None)
    return [float(c) for c in coef]


def _time_fits(
    comp: dict[str, Any], source: str, ntypes: int, seqs: list[int]
) -> tuple[str, list[tuple[float, float]], tuple[float, float]]:
    """Per layer type and for the vocabulary: (slope, intercept) of forward ms against samples per device share."""
    key = re.compile(r"^layertype_(?P<t>\d+|other(?:_\d+)?)_bsz(?P<b>\d+)_seq(?P<s>\d+)$")
    pts: dict[str, list[tuple[int, int, float]]] = {}
    for k, v in comp.items():
        m = key.match(k)
        if m is None:
            continue
        number(v, source, k, unit="ms", cap=MAX_MS)
        t = "other" if m.group("t").startswith("other") else m.group("t")
        pts.setdefault(t, []).append((int(m.group("b")), int(m.group("s")), float(v)))
    for t in [*map(str, range(ntypes)), "other"]:
        if t not in pts:
            raise InputError(f"no layertype_{t}_bsz<b>_seq<s> entries", source=source)
    for t in range(ntypes):
        have = sorted({s for _, s, _ in pts[str(t)]})
        if seqs[t] not in have and len({s for b, s, _ in pts[str(t)] if b == 1}) < 3:
            raise InputError(
                f"layertype_{t}: no profile at sequence length {seqs[t]} (profiled: {have}); give --seq-length one of them",
                source=source,
            )
    batches = {b for b, s, _ in pts["0"] if s == seqs[0]}
    mode = "batch" if len(batches) >= 2 else "sequence"
    fits: list[tuple[float, float]] = []
    for t in range(ntypes):
        if mode == "batch":
            p = [(b, v * b) for b, s, v in pts[str(t)] if s == seqs[t]]
            sl, ic = _fit([x for x, _ in p], [y for _, y in p], 1, source, f"layertype_{t} at seq {seqs[t]}")
            fits.append((sl, ic))
        else:
            p = [(s, v) for b, s, v in pts[str(t)] if b == 1]
            a2, a1, a0 = _fit([x for x, _ in p], [y for _, y in p], 2, source, f"layertype_{t} at batch 1")
            fits.append((a2 * seqs[t] * seqs[t] + a1 * seqs[t] + a0, 0.0))
    if mode == "batch":
        p = [(b, v * b) for b, s, v in pts["other"] if s == seqs[0]]
        sl, ic = _fit([x for x, _ in p], [y for _, y in p], 1, source, f"layertype_other at seq {seqs[0]}")
        vocab = (sl, ic)
    else:
        p = [(s, v) for b, s, v in pts["other"] if b == 1]
        a1, a0 = _fit([x for x, _ in p], [y for _, y in p], 1, source, "layertype_other at batch 1")
        vocab = (a1 * seqs[0] + a0, 0.0)
    return mode, fits, vocab


def _num_dict(d: Any, source: str, where: str, keys: tuple[str, ...]) -> dict[int, float]:
    if not isinstance(d, dict):
        raise InputError("expected an object", source=source, where=where)
    out: dict[int, float] = {}
    for k in keys:
        if k not in d:
            raise InputError(f"missing key {k!r}", source=source, where=where)
        out[0 if k == "checkpoint" else int(k)] = number(d[k], source, f"{where}.{k}", unit="MB", cap=MAX_MB)
    return out


def _by_seq(entry: Any, seqs: list[int], source: str, where: str) -> Any:
    if not isinstance(entry, dict):
        raise InputError("expected an object keyed by sequence length", source=source, where=where)
    tries = [str(seqs[0])] if len(set(seqs)) == 1 and len(seqs) == 1 else []
    tries += ["_".join(map(str, seqs)), "".join(map(str, seqs)), "[" + ",".join(map(str, seqs)) + "]", str(seqs[0])]
    for k in tries:
        if k in entry:
            return entry[k]
    raise InputError(f"no entry for sequence length {seqs} (has {sorted(entry)[:6]})", source=source, where=where)


def read_model_profile(
    folder: Path, *, hidden: int | None = None, layers: tuple[int, ...] | None = None, seq: int | None = None
) -> dict[str, Any]:
    """Parse a model folder into the fields of :class:`GalvatronProblem` (model, hidden, layer_types, vocab, time_mode)."""
    name, comp_path, mem_path = profile_files(folder)
    comp, mem = _object(_load(comp_path), str(comp_path)), _object(_load(mem_path), str(mem_path))
    known = KNOWN_MODELS.get(name, {})
    hidden = hidden or known.get("hidden")
    layers = layers or known.get("layers")
    if hidden is None or layers is None:
        raise InputError(
            f"model {name!r} is not one Galvatron ships (known: {', '.join(KNOWN_MODELS)}), so its hidden size and layer "
            "counts are unknown; give them with --hidden-size H --layer-counts L (L1,L2 for two layer types)",
            source=str(folder),
        )
    ntypes = len(layers)
    msrc = str(mem_path)
    types_seen = sorted(k for k in mem if re.match(r"^layertype_\d+_sp$", k))
    if types_seen != [f"layertype_{t}_sp" for t in range(ntypes)]:
        raise InputError(f"layer types {types_seen} (layertype_<i>_sp) but {ntypes} layer counts", source=msrc)
    if seq is None:
        seq = known.get("seq")
        if seq is None:
            lengths = [k for k in _object(mem["layertype_0_sp"], msrc, "layertype_0_sp") if str(k).isdigit()]
            if not lengths:
                raise InputError("no entry keyed by a sequence length; give --seq-length", source=msrc, where="layertype_0_sp")
            seq = int(max(lengths, key=int))
    if int(seq) < 1:
        raise InputError(f"must be a positive integer, got {seq}", where="--seq-length")
    seqs = [int(seq)] * ntypes
    mode, fits, vfit = _time_fits(comp, str(comp_path), ntypes, seqs)
    for what, (slope, icpt) in [*((f"layertype_{t}", f) for t, f in enumerate(fits)), ("layertype_other", vfit)]:
        # forward ms = slope * x + intercept for x = samples per device share >= 1/8 (tp_sp <= 8): never negative
        if slope < 0 or slope / 8 + icpt < 0:
            raise InputError(
                f"{what}: the fit of its profiled forward times (slope {slope:.6g} ms per sample, intercept "
                f"{icpt:.6g} ms) gives negative times; the times must grow with the batch, re-profile it",
                source=str(comp_path),
            )
    lts = []
    for t in range(ntypes):
        where = f"layertype_{t}_sp.{seqs[t]}"
        e = _by_seq(mem[f"layertype_{t}_sp"], [seqs[t]], msrc, f"layertype_{t}_sp")
        if not isinstance(e, dict) or "parameter_size" not in e:
            raise InputError("expected parameter_size (MB) and tp_activation_per_bsz_dict", source=msrc, where=where)
        param = number(e["parameter_size"], msrc, where + ".parameter_size", unit="MB", cap=MAX_MB)
        act = _num_dict(
            e.get("tp_activation_per_bsz_dict"), msrc, where + ".tp_activation_per_bsz_dict", ("1", "2", "4", "8", "checkpoint")
        )
        lts.append(LayerType(f"layertype_{t}", int(layers[t]), seqs[t], param, act, fits[t][0], fits[t][1]))

    def states(key: str) -> VocabStates:
        if key not in mem:
            raise InputError("missing", source=msrc, where=key)
        e = _by_seq(mem[key], seqs, msrc, key)
        if not isinstance(e, dict):
            raise InputError("expected model_states and activation", source=msrc, where=key)
        ks = ("1", "2", "4", "8")
        return VocabStates(
            _num_dict(e.get("model_states"), msrc, key + ".model_states", ks),
            _num_dict(e.get("activation"), msrc, key + ".activation", ks),
        )

    vocab = Vocab(
        vfit[0],
        vfit[1],
        states("other_memory_pp_off_sp"),
        states("other_memory_pp_on_first_sp"),
        states("other_memory_pp_on_last_sp"),
    )
    return {"model": name, "hidden": int(hidden), "layer_types": tuple(lts), "vocab": vocab, "time_mode": mode}


def hardware_files(devices: int) -> tuple[int, int]:
    """(nodes, GPUs per node) of ``devices`` as Galvatron names its hardware files: one node up to 8, else nodes of 8."""
    if devices <= 8:
        return 1, devices
    if devices % 8:
        raise InputError(f"--devices {devices}: above 8, only whole nodes of 8 GPUs are profiled")
    return devices // 8, 8


def _latency(sp: dict[str, Any], prefix: str, factor: float, source: str, needed: list[int]) -> dict[int, LatencyTable]:
    """Latency tables per group size of the ``prefix`` collective; every size in ``needed`` must be profiled."""
    key = re.compile(rf"^{prefix}_size_(?P<w>\d+)_(?P<s>\d+)MB_time$")
    groups: dict[int, dict[float, float]] = {}
    for k, v in sp.items():
        m = key.match(k)
        if m is None:
            continue
        groups.setdefault(int(m.group("w")), {})[float(m.group("s"))] = number(v, source, k, unit="ms", cap=MAX_MS) * factor
    for w in needed:
        if w not in groups:
            raise InputError(
                f"no {prefix}_size_{w}_<MB>MB_time entries: the {prefix} times of groups of {w} GPUs are needed "
                f"(every group size {', '.join(map(str, needed))} of a tensor/sequence-parallel layer)",
                source=source,
            )
    out = {}
    for w, table in groups.items():
        a, b = _fit(list(table), list(table.values()), 1, source, f"{prefix} group {w}")
        out[w] = LatencyTable(table, a, b)
    return out


def read_hardware(folder: Path, devices: int, memory_mb: int) -> Cluster:
    """The cluster of a hardware folder for ``devices`` GPUs with ``memory_mb`` MB each: one kind, the folder's measured
    collectives (:func:`read_collectives`) and its links (:func:`read_p2p_links`)."""
    nodes, per = hardware_files(devices)
    link, node_link = read_p2p_links(Path(folder), nodes, per)
    return galvatron_cluster(read_collectives(folder, devices), devices, memory_mb, per, link=link, node_link=node_link)


def read_p2p_links(folder: Path, nodes: int, per_node: int) -> tuple[Link, Link | None]:
    """The links between and within nodes from the folder's point-to-point bandwidths (GB/s, ``pp_size_2``).

    Within a node: ``p2p_bandwidth_1nodes_<per_node>gpus_per_node.json`` (two pipeline stages on one node); between
    nodes: ``p2p_bandwidth_<nodes>nodes_<per_node>gpus_per_node.json`` when ``nodes >= 2`` (two stages of whole
    nodes each: every message crosses).  A bandwidth of ``x`` GB/s moves one MB (:data:`MB` bytes) in ``1 / x`` ms, as
    Galvatron's cost model reads it; the latency is 0 (the files give none).  A file that is absent leaves its link
    unknown: the node link ``None`` (read as the link between nodes) and, for one node, the link between nodes free
    (no message crosses nodes).  Galvatron's costs read the measured collectives, not these links
    (:mod:`milp_partition.galvatron.costs`): they describe the hardware and change no answer.
    """

    def pp2(tag: str) -> Link | None:
        path = folder / f"p2p_bandwidth_{tag}.json"
        if not path.is_file():
            return None
        raw = _object(_load(path), str(path))
        if "pp_size_2" not in raw:
            return None
        gb_per_s = number(raw["pp_size_2"], str(path), "pp_size_2", unit="GB/s", cap=MAX_GBPS, positive=True)
        return Link(0.0, gb_per_s * MB * 1e3)

    node_link = pp2(f"1nodes_{per_node}gpus_per_node")
    if nodes == 1:
        return Link(), node_link
    return pp2(f"{nodes}nodes_{per_node}gpus_per_node") or Link(), node_link


def read_collectives(folder: Path, devices: int) -> CollectiveTables:
    """Parse a hardware folder for ``devices`` GPUs (Galvatron's ``read_allreduce_bandwidth_config`` etc.)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not a folder; give Galvatron's hardware_configs folder", source=str(folder), where="--hardware")
    nodes, per = hardware_files(devices)
    tag = f"{nodes}nodes_{per}gpus_per_node"
    ar_path = folder / f"allreduce_bandwidth_{tag}.json"
    if not ar_path.is_file():
        have = sorted(p.name[len("allreduce_bandwidth_") : -len(".json")] for p in folder.glob("allreduce_bandwidth_*.json"))
        raise InputError(
            f"no profile for {devices} GPUs ({nodes} node(s) of {per}): Galvatron's profiler writes one file per "
            f"cluster shape, and this folder has {', '.join(have) or 'none'}; profile that shape or give --devices "
            "of a profiled one",
            source=str(ar_path),
            where="--devices",
        )
    ar = _load(ar_path)
    coe: dict[str, float] = {}

    _object(ar, str(ar_path))

    def bw(key: str) -> float:
        if key not in ar:
            raise InputError("missing (all-reduce bandwidth, GB/s)", source=str(ar_path), where=key)
        return number(ar[key], str(ar_path), key, unit="GB/s", cap=MAX_GBPS, positive=True)

    if devices >= 2:
        c = 1.0 / bw(f"allreduce_size_{devices}_consec_1")
        coe[str(devices)] = coe[f"{devices}_1"] = coe[f"{devices}_0"] = c
    d = devices // 2
    while d >= 2:
        coe[f"{d}_0"] = 1.0 / bw(f"allreduce_size_{d}_consec_0")
        coe[f"{d}_1"] = 1.0 / bw(f"allreduce_size_{d}_consec_1")
        d //= 2
    coe["1"] = coe["1_1"] = coe["1_0"] = 0.0
    p2p_path = folder / f"p2p_bandwidth_{tag}.json"
    p2p_raw = _object(_load(p2p_path), str(p2p_path))
    p2p: dict[int, float] = {}
    for k, v in p2p_raw.items():
        if k.startswith("pp_size_"):
            m = re.fullmatch(r"pp_size_(\d+)", k)
            if m is None:
                raise InputError("expected a key pp_size_<pipeline degree>, e.g. pp_size_2", source=str(p2p_path), where=k)
            p2p[int(m.group(1))] = 1.0 / number(v, str(p2p_path), k, unit="GB/s", cap=MAX_GBPS, positive=True)
    ov_path = folder / "overlap_coefficient.json"
    ov = _object(_load(ov_path), str(ov_path))
    if "overlap_coe" not in ov:
        raise InputError("missing (the compute/communication overlap coefficient)", source=str(ov_path), where="overlap_coe")
    overlap = number(ov["overlap_coe"], str(ov_path), "overlap_coe", unit="a factor", cap=1e3, positive=True)
    sp_path = folder / f"sp_time_{tag}.json"
    if not sp_path.is_file():
        sp_path = folder / "sp_time_1nodes_8gpus_per_node.json"
    sp = _object(_load(sp_path), str(sp_path))
    groups = []
    g = 2
    while g <= min(8, devices):
        groups.append(g)
        g *= 2
    allgather = _latency(sp, "allreduce", 0.5, str(sp_path), groups)
    all2all = _latency(sp, "all2all", 1.0, str(sp_path), groups)
    return CollectiveTables(coe, p2p, overlap, allgather, all2all, str(folder))


def read_galvatron(
    folder: Path,
    hardware: Path,
    *,
    devices: int,
    memory_mb: int,
    global_batch: int,
    hidden: int | None = None,
    layers: tuple[int, ...] | None = None,
    seq: int | None = None,
) -> GalvatronProblem:
    """The whole problem: model folder + hardware folder + setting (memory per device in MB, Galvatron's GB x 1024)."""
    if devices < 1 or devices & (devices - 1):
        raise InputError(f"--devices must be a power of two, got {devices}")
    if not 1 <= global_batch <= MAX_GLOBAL_BATCH:
        raise InputError(
            f"must be a positive integer of at most 2**31 = {MAX_GLOBAL_BATCH} samples, got {global_batch}",
            where="--global-batch",
        )
    if memory_mb < 1:
        raise InputError("--memory must be at least 1 MiB")
    prof = read_model_profile(Path(folder), hidden=hidden, layers=layers, seq=seq)
    cluster = read_hardware(Path(hardware), devices, memory_mb)
    hw = cluster.collectives
    assert hw is not None
    # the smallest message a collective carries: one sample's activations of a layer (bf16), in MB
    smallest = min(lt.seq for lt in prof["layer_types"]) * int(prof["hidden"]) * BYTES_PER_ELEMENT / 2**20
    for name, tables in (("allreduce", hw.allgather), ("all2all", hw.all2all)):
        for w, tab in tables.items():
            if tab.slope < 0 or tab.slope * smallest + tab.intercept < 0:
                raise InputError(
                    f"sp_time: {name}_size_{w}_<MB>MB_time: the fit of its times (slope {tab.slope:.6g} ms per MB, intercept "
                    f"{tab.intercept:.6g} ms) gives negative times from {smallest:.4g} MB; the times must grow with the "
                    "message size, re-profile them",
                    source=hw.source,
                )
    return GalvatronProblem(source=str(folder), cluster=cluster, global_batch=global_batch, **prof)
