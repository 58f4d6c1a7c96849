"""Piecewise (regime) alpha-beta fits of copies and transfers, and their place in the profile JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from milp_partition.calibration.fit import fit_line, fit_piecewise
from milp_partition.calibration.profile import AlphaBeta, Regime, datasheet_profile, load_profile, profile_to_dict
from milp_partition.errors import InputError

SIZES = 2.0 ** np.arange(12, 31)  # 4 KiB .. 1 GiB


def _two_regimes(noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """In cache (60 GB/s) below 4 MiB, from memory (15 GB/s) above, alpha 1 us; relative noise."""
    rng = np.random.default_rng(seed)
    t = np.where(SIZES < 4 * 2**20, 1e-6 + SIZES / 60e9, 1e-6 + SIZES / 15e9)
    return t * (1 + noise * rng.standard_normal(len(t)))


def test_two_regimes_are_found_and_predicted() -> None:
    t = _two_regimes(noise=0.01)
    f = fit_piecewise(SIZES, t, holdout_every=3)
    assert len(f.starts) >= 2
    assert 1 / f.betas[0] == pytest.approx(60e9, rel=0.1) and 1 / f.betas[-1] == pytest.approx(15e9, rel=0.05)
    assert f.holdout_median_rel_error < 0.05
    line = fit_line(SIZES, t, holdout_every=3)
    assert line.holdout_median_rel_error > 3 * f.holdout_median_rel_error  # one line averages the regimes


def test_one_regime_stays_one_line() -> None:
    t = 2e-6 + SIZES / 20e9
    f = fit_piecewise(SIZES, t, holdout_every=3)
    assert len(f.starts) == 1 and 1 / f.betas[0] == pytest.approx(20e9, rel=1e-6)


def test_alpha_beta_regimes_price_by_size_and_round_trip(tmp_path) -> None:
    ab = AlphaBeta(1e-6, 1 / 15e9, "copy", (Regime(0.0, 1e-6, 1 / 60e9), Regime(2**22, 1e-6, 1 / 15e9)))
    assert ab.time_s(2**20) == pytest.approx(1e-6 + 2**20 / 60e9)
    assert ab.time_s(2**24) == pytest.approx(1e-6 + 2**24 / 15e9)
    profile = replace(datasheet_profile("H100"), memory=ab)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile_to_dict(profile)))
    assert load_profile(path).memory == ab
    data = profile_to_dict(profile)
    data["memory"]["regimes"][1]["from_bytes"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="ascending from_bytes"):
        load_profile(path)
