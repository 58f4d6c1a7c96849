"""The microbenchmark suite for real: NumPy here, CuPy where cupy and a GPU exist (skipped otherwise)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from milp_partition.calibration import kernels
from milp_partition.calibration.backend import NumpyBackend, cupy_unavailable_reason, select_backend
from milp_partition.calibration.build import build_profile
from milp_partition.calibration.profile import load_profile, write_profile
from milp_partition.calibration.settings import TimingSettings, preset
from milp_partition.calibration.suite import run_suite
from milp_partition.cli.dispatch import main

MIB = 2**20

#: Largest median relative error allowed when predicting held-out sizes of the CPU fits.
#: A correct fit on this shared 2-core machine (timed by thread CPU time, load 5) stays well under
#: it (about 0.09 for GEMM, under 0.05 for copies); a fit with a doubled or halved slope, or bytes
#: mistaken for elements, is off by 0.5 or more.
HOLDOUT_MEDIAN_TOLERANCE = 0.25


def _tiny_profile(backend_name: str = "numpy"):
    backend = select_backend(backend_name)
    settings = preset("tiny", backend.name)
    result = run_suite(backend, settings)
    return backend, settings, result, build_profile(backend, settings, result)


def test_numpy_tiny_suite_writes_a_valid_profile(tmp_path) -> None:
    _, settings, _, profile = _tiny_profile()
    assert profile.source == "measured" and profile.backend == "numpy"
    assert set(profile.links) == {"h2d", "d2h", "d2d"}
    assert "memcpy between two host buffers" in profile.links["h2d"].note
    assert "float32" in profile.compute and "float16" in profile.compute and "bfloat16" not in profile.compute
    assert any("bfloat16" in n for n in profile.notes)
    assert profile.launch_latency_s > 0
    kinds = {m.benchmark for m in profile.measurements}
    assert kinds == {"gemm", "copy", "scale_add", "reduction", "empty", "h2d", "d2h", "d2d"}
    assert any(m.held_out for m in profile.measurements)
    assert all(len(m.times_s) == settings.timing.repeats for m in profile.measurements)
    for f in profile.fits:
        assert f.r2 <= 1.0 and f.n_points >= 3
    path = tmp_path / "numpy.json"
    write_profile(profile, path)
    again = load_profile(path)
    assert again == profile
    assert again.compute_time_s(2 * 64**3, 3 * 64 * 64 * 4) > 0
    assert "numpy" in again.versions and again.versions["suite_preset"] == "tiny"


def test_a_wrong_gemm_is_refused(monkeypatch) -> None:
    def wrong(xp, a, b, out):  # transposed operand: plausible numbers, wrong result
        return xp.matmul(a, b.T, out=out)

    monkeypatch.setattr(kernels, "gemm", wrong)
    with pytest.raises(kernels.KernelCheckError, match="gemm"):
        run_suite(NumpyBackend(), preset("tiny", "numpy"))


def test_a_wrong_copy_and_a_wrong_scale_add_are_refused(monkeypatch) -> None:
    settings = replace(preset("tiny", "numpy"), gemm_sizes=(16, 32, 48))

    def short_copy(xp, src, dst):
        xp.copyto(dst[:-1], src[:-1])
        dst[-1] = -1.0
        return dst

    with monkeypatch.context() as m:
        m.setattr(kernels, "copy", short_copy)
        with pytest.raises(kernels.KernelCheckError, match="copy"):
            run_suite(NumpyBackend(), settings)

    def off_scale_add(xp, x, y, out, alpha):
        xp.multiply(x, alpha * 1.01, out=out)
        xp.add(out, y, out=out)
        return out

    monkeypatch.setattr(kernels, "scale_add", off_scale_add)
    with pytest.raises(kernels.KernelCheckError, match="scale_add"):
        run_suite(NumpyBackend(), settings)


def test_numpy_fits_predict_held_out_sizes() -> None:
    """The quick suite's GEMM and copy grids (cut at n = 512 and 64 MiB to stay fast) predict held-out sizes."""
    quick = preset("quick", "numpy")
    settings = replace(
        quick,
        gemm_dtypes=("float32",),
        gemm_sizes=(32, 48, 64, 96, 128, 192, 256, 384, 512),
        stream_kernels=("copy",),
        stream_sizes_bytes=tuple(int(k * MIB) for k in (8, 12, 16, 24, 32, 48, 64)),
        transfer_sizes_bytes=(64, 4096, 65536, MIB, 4 * MIB),
        transfer_fit_min_bytes=0,
        timing=TimingSettings(warmup=1, repeats=7, min_sample_time_s=1e-3),
    )
    backend = NumpyBackend()

    def failures(profile) -> list[str]:
        fits = {f.name: f for f in profile.fits}
        bad = []
        for name in ("gemm float32", "copy"):
            f = fits[name]
            assert f.n_holdout >= 2, name
            assert f.holdout_median_rel_error is not None
            if not (f.holdout_median_rel_error < HOLDOUT_MEDIAN_TOLERANCE and f.r2 > 0.8):
                bad.append(f"{name}: held-out median {f.holdout_median_rel_error:.3f}, R^2 {f.r2:.3f}")
        return bad

    # Timing on a shared machine is noisy: measure up to three times and pass when one run's fits predict well.
    # A broken fit (wrong model, wrong units) misses the tolerance every time, so it still fails.
    attempts = []
    for _ in range(3):
        profile = build_profile(backend, settings, run_suite(backend, settings))
        attempts.append(failures(profile))
        if not attempts[-1]:
            break
    assert not attempts[-1], attempts
    # sanity of the coefficients themselves: a CPU core does 1-1000 GFLOP/s and copies at 0.5-500 GB/s
    assert 1e9 < profile.compute["float32"].peak_flop_per_s < 1e12
    assert 5e8 < profile.memory.bandwidth_bytes_per_s < 5e11


def test_cli_calibrate_numpy_end_to_end(tmp_path, capsys) -> None:
    out = tmp_path / "prof.json"
    assert main(["calibrate", "--backend", "numpy", "--tiny", "--no-progress", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert "gemm float32" in captured.out and "R^2" in captured.out
    assert load_profile(out).backend == "numpy"


def test_cli_calibrate_progress_goes_to_stderr(tmp_path, capsys) -> None:
    assert main(["calibrate", "--backend", "numpy", "--tiny", "--output", str(tmp_path / "p.json")]) == 0
    captured = capsys.readouterr()
    assert "done" in captured.err and "[" in captured.err
    assert "done" not in captured.out


@pytest.mark.skipif(cupy_unavailable_reason() is None, reason="cupy with a GPU is present: the backend runs")
def test_cli_calibrate_cupy_without_cupy_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["calibrate", "--backend", "cupy", "--output", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cupy" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "p.json").exists()


# -- CuPy: run for real where cupy and a GPU exist --------------------------------------------


def _require_gpu():
    pytest.importorskip("cupy")
    reason = cupy_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def test_cupy_tiny_suite_runs_and_matches_the_reference(tmp_path) -> None:
    _require_gpu()
    backend, _, _, profile = _tiny_profile("cupy")
    assert profile.backend == "cupy" and profile.source == "measured"
    assert "cupy" in profile.versions and "cuda_driver" in profile.versions
    assert profile.launch_latency_s < 1e-3
    assert profile.memory_bytes is not None and profile.memory_bytes > 2**30
    write_profile(profile, tmp_path / "gpu.json")
    assert load_profile(tmp_path / "gpu.json") == profile
    if backend.device_count >= 2:
        assert any(m.benchmark == "allreduce" for m in profile.measurements)
        assert "measured" in profile.allreduce.note


def test_cupy_wrong_kernel_is_refused(monkeypatch) -> None:
    _require_gpu()

    def wrong(xp, a, b, out):
        return xp.matmul(b, a, out=out)

    monkeypatch.setattr(kernels, "gemm", wrong)
    with pytest.raises(kernels.KernelCheckError):
        run_suite(select_backend("cupy"), preset("tiny", "cupy"))


def test_cupy_and_numpy_compute_the_same_products() -> None:
    _require_gpu()
    import cupy

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    out = cupy.empty((64, 64), dtype=cupy.float32)
    kernels.gemm(cupy, cupy.asarray(a), cupy.asarray(b), out)
    np.testing.assert_allclose(cupy.asnumpy(out), a @ b, rtol=1e-4, atol=1e-4)
