"""Calibration without timing: fits on synthetic data, profile files, datasheets, apply_profile."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from milp_partition.calibration.apply import ApplySettings, apply_profile
from milp_partition.calibration.datasheets import DATASHEETS
from milp_partition.calibration.fit import FitError, fit_line, holdout_mask, least_squares, quality
from milp_partition.calibration.profile import (
    PROFILE_FORMAT,
    datasheet_profile,
    load_profile,
    profile_to_dict,
    resolve_profile,
    write_profile,
)
from milp_partition.errors import InputError
from milp_partition.graph import Edge, Node, make_graph

# -- fits -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alpha", "beta", "x"),
    [
        (5e-6, 1 / 12e9, np.geomspace(8, 256 * 2**20, 24)),  # a PCIe-like link: 5 us, 12 GB/s
        (2e-5, 1 / 50e12, 2.0 * np.geomspace(256, 8192, 14) ** 3),  # GEMM: 20 us overhead, 50 TFLOP/s
        (0.0, 1 / 20e9, np.geomspace(2**23, 2**30, 10)),  # streaming, no intercept
    ],
)
def test_fit_recovers_known_coefficients_from_noisy_data(alpha: float, beta: float, x: np.ndarray) -> None:
    rng = np.random.default_rng(7)
    t = (alpha + beta * x) * rng.lognormal(0.0, 0.03, len(x))  # 3 % multiplicative noise
    f = fit_line(x, t, holdout_every=3)
    assert f.beta == pytest.approx(beta, rel=0.05)
    # the intercept is only identifiable where it is a visible part of the time
    assert f.alpha == pytest.approx(alpha, rel=0.2, abs=0.02 * float(t.min()))
    assert f.n_holdout >= 2 and f.n_points + f.n_holdout == len(x)
    assert f.holdout_median_rel_error is not None and f.holdout_median_rel_error < 0.08
    assert f.max_rel_residual < 0.15
    assert f.r2 > 0.99


def test_holdout_mask_keeps_ends_and_enough_points() -> None:
    m = holdout_mask(10, 3)
    assert list(np.flatnonzero(m)) == [1, 4, 7]
    assert not m[0] and not m[-1]
    assert not holdout_mask(3, 3).any()  # would leave too few points
    assert not holdout_mask(10, 1).any()


def test_fit_holds_out_in_size_order_whatever_the_input_order() -> None:
    x = np.array([64.0, 8.0, 32.0, 16.0, 128.0, 256.0])
    f = fit_line(x, 1e-6 + x * 1e-9, holdout_every=3)
    held = {xi for xi, h in zip(x, f.held_out) if h}
    assert held == {16.0, 128.0}  # sorted positions 1 and 4


def test_least_squares_clips_a_negative_intercept_and_rejects_flat_data() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    alpha, beta = least_squares(x, 2.0 * x - 0.5)
    assert alpha == 0.0 and beta > 0
    with pytest.raises(FitError, match="slope"):
        least_squares(x, np.array([4.0, 3.0, 2.0, 1.0]))
    with pytest.raises(FitError):
        least_squares(np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    r2, worst = quality(x, 1.0 + x, 1.0, 1.0)
    assert r2 == pytest.approx(1.0) and worst == pytest.approx(0.0)


def test_a_broken_fit_fails_the_holdout_check() -> None:
    """The held-out error is a real check: wrong coefficients give large errors."""
    x = np.geomspace(2**20, 2**28, 9)
    t = 1e-5 + x / 10e9
    good = fit_line(x, t, 3)
    assert good.holdout_max_rel_error is not None and good.holdout_max_rel_error < 1e-9
    held = np.array(good.held_out)
    broken = np.abs(good.alpha + x[held] * 2 * good.beta - t[held]) / t[held]
    assert np.median(broken) > 0.5


# -- profiles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["V100", "a100", "H100", "h200"])
def test_datasheet_profiles_round_trip_and_are_marked(tmp_path, name: str) -> None:
    p = datasheet_profile(name)
    assert p.source == "datasheet" and p.backend == "datasheet"
    assert p.assumptions and not p.measurements
    path = tmp_path / "p.json"
    write_profile(p, path)
    q = load_profile(path)
    assert q == p
    assert json.loads(path.read_text())["format"] == PROFILE_FORMAT


def test_datasheet_times_are_sane() -> None:
    h100, h200, a100, v100 = (datasheet_profile(n) for n in ("H100", "H200", "A100", "V100"))
    n = 8192
    flops, nbytes = 2.0 * n**3, 3 * n * n * 2
    t = h100.compute_time_s(flops, nbytes, "bfloat16")
    assert 1e-3 < t < 3e-3  # 1.1 PFLOP at 0.7 x 989 TFLOP/s: about 1.6 ms
    assert v100.compute_time_s(flops, nbytes, "float16") > a100.compute_time_s(flops, nbytes, "float16") > t
    # memory-bound work: H200's HBM3e beats H100's HBM3
    assert h200.compute_time_s(1e6, 4e9) < h100.compute_time_s(1e6, 4e9)
    assert h100.compute_time_s(0, 0) == h100.launch_latency_s
    # 1 GB over PCIe gen5 (64 GB/s per direction, 80 % assumed): about 20 ms
    assert h100.transfer_time_s(1e9, "h2d") == pytest.approx(1e9 / (64e9 * 0.8) + 10e-6)
    assert h100.transfer_time_s(0, "d2d") == 0.0
    assert h100.transfer_time_s(1e9, "d2d") < h100.transfer_time_s(1e9, "h2d")
    assert h100.allreduce_time_s(1e9, 1) == 0.0
    ab = h100.allreduce
    assert h100.allreduce_time_s(1e9, 8) == pytest.approx(2 * 7 / 8 * 1e9 * ab.beta_s_per_byte + 14 * ab.alpha_s)
    # efficiency is relative to the profile's peak (already the datasheet peak x the assumed 0.7)
    assert 0.9 < h100.flop_efficiency(flops, "bfloat16") < 1.0
    assert h100.flop_efficiency(1e6, "bfloat16") < 0.01
    with pytest.raises(InputError, match="bfloat16"):
        v100.compute_time_s(1e9, 0, "bfloat16")
    with pytest.raises(ValueError):
        h100.allreduce_time_s(1e9, 0)
    assert set(DATASHEETS) == {"V100", "A100", "H100", "H200"}


def test_resolve_profile_takes_names_and_paths(tmp_path) -> None:
    assert resolve_profile("h100").name.startswith("H100")
    path = tmp_path / "mine.json"
    write_profile(datasheet_profile("A100"), path)
    assert resolve_profile(str(path)).name.startswith("A100")
    with pytest.raises(InputError, match="neither a datasheet name"):
        resolve_profile("B200")


def _bad(tmp_path, mutate) -> str:
    data = profile_to_dict(datasheet_profile("H100"))
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        load_profile(path)
    msg = str(info.value)
    assert msg.startswith(str(path)), msg
    return msg


def test_bad_profiles_name_the_file_and_the_field(tmp_path) -> None:
    assert "compute.float32.peak_flop_per_s" in _bad(tmp_path, lambda d: d["compute"]["float32"].update(peak_flop_per_s=-1.0))
    assert "'launch_latency_s'" in _bad(tmp_path, lambda d: d.pop("launch_latency_s"))
    assert "links" in _bad(tmp_path, lambda d: d["links"].pop("d2h"))
    assert "backend" in _bad(tmp_path, lambda d: d.update(source="measured"))  # datasheet backend but 'measured'
    assert "'source'" in _bad(tmp_path, lambda d: d.update(source="guessed"))
    assert "links.h2d.beta_s_per_byte" in _bad(tmp_path, lambda d: d["links"]["h2d"].update(beta_s_per_byte="fast"))
    assert "memory_bytes" in _bad(tmp_path, lambda d: d.update(memory_bytes=1.5))


def test_foreign_truncated_and_missing_files_are_refused(tmp_path) -> None:
    foreign = tmp_path / "graph.json"
    foreign.write_text(json.dumps({"format": "milp-partition/1", "nodes": [], "edges": []}))
    with pytest.raises(InputError, match=r"graph\.json: field 'format': not a device profile"):
        load_profile(foreign)
    truncated = tmp_path / "cut.json"
    full = json.dumps(profile_to_dict(datasheet_profile("V100")))
    truncated.write_text(full[: len(full) // 2])
    with pytest.raises(InputError, match=r"cut\.json: invalid JSON"):
        load_profile(truncated)
    with pytest.raises(InputError, match="no such file"):
        load_profile(tmp_path / "absent.json")
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a JSON object"):
        load_profile(listing)


# -- apply_profile ----------------------------------------------------------------------------


def _graph(unit: str, measured: bool):
    nodes = [
        Node("a", forward_time=2.0 if measured else 0.0, backward_time=4.0 if measured else 0.0, flops=1e12),
        Node("b", flops=3e12, param_bytes=10**8, activation_bytes=10**8),
        Node("c"),  # neither time nor FLOPs
        Node("d", flops=1e9, is_backward=True, param_bytes=10**9),
    ]
    return make_graph(nodes, [Edge("a", "b", 100), Edge("b", "c", 10), Edge("c", "d", 1)], time_unit=unit)


def test_apply_profile_fills_missing_times_and_keeps_measured_ones() -> None:
    p = datasheet_profile("H100")
    g, report = apply_profile(_graph("ms", measured=True), p)
    assert report.filled == ("b", "d") and report.kept == ("a",) and report.no_flops == ("c",)
    a, b, c, d = g.nodes
    assert (a.forward_time, a.backward_time) == (2.0, 4.0)
    s = ApplySettings()
    assert b.forward_time == pytest.approx(1e3 * p.compute_time_s(1e12, 2e8))
    assert b.backward_time == pytest.approx(1e3 * p.compute_time_s(2e12, 4e8))
    assert c.forward_time == 0.0 and c.backward_time == 0.0
    assert d.forward_time == 0.0 and d.backward_time == pytest.approx(1e3 * p.compute_time_s(1e9, s.param_passes_backward * 1e9))
    assert g.time_unit == "ms"


def test_apply_profile_units() -> None:
    p = datasheet_profile("A100")
    g, report = apply_profile(_graph("unitless", measured=False), p)
    assert report.time_unit == "s" and g.time_unit == "s" and report.filled == ("a", "b", "d")
    with pytest.raises(InputError, match="unitless"):
        apply_profile(_graph("unitless", measured=True), p)
    with pytest.raises(InputError, match="dtype"):
        apply_profile(_graph("ms", measured=False), datasheet_profile("V100"), ApplySettings(dtype="bfloat16"))


def test_profile_times_are_finite_for_every_datasheet() -> None:
    for name in DATASHEETS:
        p = datasheet_profile(name)
        for dtype in p.dtypes:
            assert math.isfinite(p.compute_time_s(1e12, 1e9, dtype))


def test_solve_with_profile_fills_times_of_a_flops_only_graph(tmp_path, capsys) -> None:
    from pathlib import Path

    from milp_partition.cli.dispatch import main

    data = json.loads((Path(__file__).resolve().parents[1] / "examples" / "tiny.json").read_text())
    for node in data["nodes"]:
        if node["flops"] is not None:
            node["forward_time"] = 0.0
    path = tmp_path / "flops_only.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path), "--solver", "none", "--quiet"]) == 0
    without = capsys.readouterr().out
    assert main(["solve", str(path), "--solver", "none", "--quiet", "--profile", "V100"]) == 0
    with_v100 = capsys.readouterr().out
    assert main(["solve", str(path), "--solver", "none", "--quiet", "--profile", "H100"]) == 0
    with_h100 = capsys.readouterr().out

    def objective(line: str) -> float:
        return float(line.split("objective=")[1].split()[0])

    # the measured times of 'input' and 'concat' stay; the profile adds the rest, a V100 more slowly than an H100
    assert objective(with_v100) > objective(with_h100) > objective(without)
    assert main(["solve", str(path), "--solver", "none", "--quiet", "--profile", str(tmp_path / "missing.json")]) == 2
    assert "neither a datasheet name" in capsys.readouterr().err


def test_profile_gives_the_link_when_no_cluster_is_given(tmp_path) -> None:
    """A graph without a cluster, solved with --devices and --profile, moves tensors over the profile's d2d link;
    an instance's own cluster link, or --link-* flags, are kept."""
    from pathlib import Path

    from milp_partition.calibration.profile import datasheet_profile
    from milp_partition.cli.dispatch import build_parser
    from milp_partition.cli.pipeline import problem_from_args as _problem_from_args

    data = json.loads((Path(__file__).resolve().parents[1] / "examples" / "tiny.json").read_text())
    data.pop("cluster", None)
    path = tmp_path / "no_cluster.json"
    path.write_text(json.dumps(data))
    d2d = datasheet_profile("H100").links["d2d"]
    args = build_parser().parse_args(["solve", str(path), "--devices", "2", "--profile", "H100"])
    link = _problem_from_args(args).cluster.link
    assert link.latency_s == d2d.alpha_s and link.bandwidth_bytes_per_s == pytest.approx(d2d.bandwidth_bytes_per_s)
    args = build_parser().parse_args(["solve", str(path), "--devices", "2", "--profile", "H100", "--link-latency", "0.5"])
    assert _problem_from_args(args).cluster.link.latency_s == 0.5
    args = build_parser().parse_args(["solve", str(path), "--devices", "2"])
    assert _problem_from_args(args).cluster.link.latency_s == 0.0  # no profile: the default link
    own = Path(__file__).resolve().parents[1] / "examples" / "tiny.json"
    args = build_parser().parse_args(["solve", str(own), "--profile", "H100"])
    assert _problem_from_args(args).cluster.link.latency_s == 1e-05  # the instance's own link stays
