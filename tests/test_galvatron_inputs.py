"""Galvatron's profile and hardware folders: every bad number or missing entry is refused naming the file and the field
(exit 2), never solved into a wrong answer or an internal error (issue 43, items 1, 10 and 11)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from milp_partition.cli.dispatch import build_parser, main
from milp_partition.cli.galvatron import problem_from_args
from milp_partition.errors import InputError
from milp_partition.io.galvatron import read_galvatron

COMP = "m/computation_profiling_bf16_llama2-7b_all.json"
MEM = "m/memory_profiling_bf16_llama2-7b_all.json"
AR = "hw/allreduce_bandwidth_1nodes_8gpus_per_node.json"
P2P = "hw/p2p_bandwidth_1nodes_8gpus_per_node.json"
SP = "hw/sp_time_1nodes_8gpus_per_node.json"
OV = "hw/overlap_coefficient.json"


@pytest.fixture(scope="module")
def root(shared_benchmarks: Path) -> Path:
    return shared_benchmarks / "galvatron"


def _copy(tmp_path: Path, root: Path) -> Path:
    shutil.copytree(root / "models/llama2-7b", tmp_path / "m")
    shutil.copytree(root / "hardware", tmp_path / "hw")
    return tmp_path


def _edit(path: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text())
    out = change(data)
    path.write_text(json.dumps(data if out is None else out))


def _act(d: dict[str, Any]) -> dict[str, Any]:
    return d["layertype_0_sp"]["2048"]["tp_activation_per_bsz_dict"]


def _drop(d: dict[str, Any], part: str) -> None:
    for k in [k for k in d if part in k]:
        del d[k]


#: (file, change, the field the message must name): NaN, infinity, 1e308, negatives, booleans, strings, bad keys,
#: missing collective groups, a non-object file.  Each once solved wrongly or crashed.
CASES: list[tuple[str, Callable[[Any], Any], str]] = [
    (COMP, lambda d: d.__setitem__("layertype_0_bsz8_seq2048", float("nan")), "layertype_0_bsz8_seq2048"),
    (COMP, lambda d: d.__setitem__("layertype_0_bsz8_seq2048", -3.0), "layertype_0_bsz8_seq2048"),
    (COMP, lambda d: 3, "expected a JSON object"),
    (MEM, lambda d: d["layertype_0_sp"]["2048"].__setitem__("parameter_size", float("nan")), "parameter_size"),
    (MEM, lambda d: _act(d).__setitem__("1", float("inf")), "tp_activation_per_bsz_dict.1"),
    (MEM, lambda d: _act(d).__setitem__("1", 1e308), "tp_activation_per_bsz_dict.1"),
    (MEM, lambda d: _act(d).__setitem__("2", -1e-9), "tp_activation_per_bsz_dict.2"),
    (MEM, lambda d: _act(d).__setitem__("checkpoint", True), "tp_activation_per_bsz_dict.checkpoint"),
    (MEM, lambda d: d["other_memory_pp_off_sp"]["2048"]["model_states"].__setitem__("1", float("nan")), "model_states.1"),
    (AR, lambda d: d.__setitem__("allreduce_size_8_consec_1", float("nan")), "allreduce_size_8_consec_1"),
    (AR, lambda d: d.__setitem__("allreduce_size_4_consec_0", "155"), "allreduce_size_4_consec_0"),
    (P2P, lambda d: d.__setitem__("pp_size_2", True), "pp_size_2"),
    (P2P, lambda d: d.__setitem__("pp_size_4", float("inf")), "pp_size_4"),
    (P2P, lambda d: d.__setitem__("pp_size_x", 3.0), "pp_size_x"),
    (OV, lambda d: d.__setitem__("overlap_coe", -1.0), "overlap_coe"),
    (OV, lambda d: d.__setitem__("overlap_coe", float("nan")), "overlap_coe"),
    (SP, lambda d: d.__setitem__("all2all_size_2_1MB_time", -5.0), "all2all_size_2_1MB_time"),
    (SP, lambda d: d.__setitem__("allreduce_size_8_1MB_time", float("nan")), "allreduce_size_8_1MB_time"),
    (SP, lambda d: _drop(d, "all2all"), "all2all_size_2_"),
    (SP, lambda d: _drop(d, "_size_8_"), "allreduce_size_8_"),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_bad_number_is_refused_naming_file_and_field(tmp_path: Path, root: Path, k: int) -> None:
    rel, change, field = CASES[k]
    d = _copy(tmp_path, root)
    _edit(d / rel, change)
    with pytest.raises(InputError) as err:
        read_galvatron(d / "m", d / "hw", devices=8, memory_mb=36 * 1024, global_batch=16)
    assert Path(rel).name in str(err.value) and field in str(err.value)


def _decreasing_forward(d: dict[str, Any]) -> None:
    for k in d:
        if k.startswith("layertype_0_bsz"):
            b = int(k.split("_bsz")[1].split("_")[0])
            d[k] = 100.0 / b / b  # per-sample ms x b falls with b: a negative slope


def _decreasing_latency(d: dict[str, Any]) -> None:
    for k in d:
        if k.startswith("allreduce_size_2_"):
            d[k] = 20.0 - 0.019 * float(k.split("_")[3][:-2])  # positive at every measured size, falling


@pytest.mark.parametrize(
    ("rel", "change", "named"),
    [(COMP, _decreasing_forward, "layertype_0: the fit"), (SP, _decreasing_latency, "allreduce_size_2_<MB>MB_time: the fit")],
)
def test_a_fit_giving_negative_times_is_refused(
    tmp_path: Path, root: Path, rel: str, change: Callable[[Any], Any], named: str
) -> None:
    """Non-negative measurements whose fit goes negative where it is used once gave negative "verified" times."""
    d = _copy(tmp_path, root)
    _edit(d / rel, change)
    with pytest.raises(InputError, match="negative times") as err:
        read_galvatron(d / "m", d / "hw", devices=8, memory_mb=36 * 1024, global_batch=16)
    assert named in str(err.value)


def test_cli_exits_2_on_a_nan_time(tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN forward time once answered "proven infeasible" (exit 3)."""
    d = _copy(tmp_path, root)
    _edit(d / COMP, lambda x: x.__setitem__("layertype_0_bsz8_seq2048", float("nan")))
    rc = main(
        [
            "solve",
            str(d / "m"),
            "--hardware",
            str(d / "hw"),
            "--devices",
            "8",
            "--memory",
            "36GiB",
            "--global-batch",
            "16",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "layertype_0_bsz8_seq2048" in err and "Traceback" not in err


def test_folder_missing_its_memory_profile_names_the_file(tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy(tmp_path, root)
    for f in (d / "m").glob("memory_profiling_*"):
        f.unlink()
    rc = main(
        [
            "solve",
            str(d / "m"),
            "--hardware",
            str(d / "hw"),
            "--devices",
            "8",
            "--memory",
            "36GiB",
            "--global-batch",
            "16",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "missing memory_profiling_bf16_llama2-7b_all.json" in err


def test_unknown_model_names_flags_that_exist_and_they_work(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model Galvatron does not ship: the message names --hidden-size and --layer-counts, and with them the folder
    reads as the same problem as the shipped llama2-7b."""
    d = tmp_path / "mymodel"
    d.mkdir()
    for kind in ("computation", "memory"):
        shutil.copy(
            root / f"models/llama2-7b/{kind}_profiling_bf16_llama2-7b_all.json", d / f"{kind}_profiling_bf16_mine_all.json"
        )
    parser = build_parser()
    base = ["solve", str(d), "--hardware", str(root / "hardware"), "--devices", "8", "--memory", "36GiB", "--global-batch", "16"]
    with pytest.raises(InputError) as err:
        problem_from_args(parser.parse_args(base))
    text = str(err.value)
    assert "--hidden-size" in text and "--layer-counts" in text
    mine = problem_from_args(parser.parse_args([*base, "--hidden-size", "4096", "--layer-counts", "32", "--seq-length", "2048"]))
    llama = read_galvatron(root / "models/llama2-7b", root / "hardware", devices=8, memory_mb=36 * 1024, global_batch=16)
    assert (mine.hidden, mine.layer_types, mine.vocab) == (llama.hidden, llama.layer_types, llama.vocab)
    with pytest.raises(InputError, match="--layer-counts"):
        problem_from_args(parser.parse_args([*base, "--hidden-size", "4096", "--layer-counts", "0"]))
    # info (which has no such flags) describes the folder and says what solve needs
    capsys.readouterr()
    assert main(["info", str(d)]) == 0
    out = capsys.readouterr().out
    assert "not one Galvatron ships" in out and "--hidden-size H --layer-counts L" in out


def test_gap_setting_file_refuses_misspelt_keys(tmp_path: Path, root: Path) -> None:
    from milp_partition.galvatron import gap as galvatron_gap

    base = {
        "format": galvatron_gap.FORMAT,
        "model": str(root / "models/llama2-7b"),
        "hardware": str(root / "hardware"),
        "devices": 8,
        "memory": "36GiB",
        "global_batch": 16,
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**base, "global_bacth": 64}))
    with pytest.raises(InputError, match=r"global_bacth.*did you mean 'global_batch'"):
        galvatron_gap.load(path, (), {})
    path.write_text(json.dumps({**base, "global_batch": True}))
    with pytest.raises(InputError, match="global_batch must be an integer"):
        galvatron_gap.load(path, (), {})


@pytest.mark.parametrize(
    ("seq", "named"),
    [(0, "--seq-length: must be a positive integer"), (4096, "no profile at sequence length 4096 (profiled: [2048])")],
)
def test_a_sequence_length_not_profiled_is_named(root: Path, seq: int, named: str) -> None:
    with pytest.raises(InputError) as err:
        read_galvatron(root / "models/llama2-7b", root / "hardware", devices=8, memory_mb=36 * 1024, global_batch=16, seq=seq)
    assert named in str(err.value)


def test_a_cluster_shape_without_a_hardware_profile_is_named(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--devices 64 needs Galvatron's profile of 8 nodes of 8 GPUs, which the shipped folder lacks: exit 2 naming
    --devices, the shape and the shapes the folder has (it said 'no such file; check the path' before)."""
    args = ["solve", str(root / "models" / "llama2-7b"), "--hardware", str(root / "hardware"), "--devices", "64"]
    assert main([*args, "--memory", "80GiB", "--global-batch", "64", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--devices: no profile for 64 GPUs (8 node(s) of 8)" in err
    assert "1nodes_8gpus_per_node" in err and "2nodes_8gpus_per_node" in err and "check the path" not in err
