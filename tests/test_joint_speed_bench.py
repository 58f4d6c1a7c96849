"""The pure-Python parts of ``benchmarks/joint_speed.py`` (ours beside Piper's C++ DP): no compiling, no timing.

The driver's JSON line, the target rule ("met"), the values' agreement, and the path where no Piper
repository is at hand (the Piper columns say "not run", the rest still runs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from milp_partition.units import parse_bytes

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "joint_speed.py"


@pytest.fixture(scope="module")
def js() -> Any:
    spec = importlib.util.spec_from_file_location("joint_speed", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["joint_speed"] = module
    spec.loader.exec_module(module)
    return module


def test_driver_line_is_the_last_json_line(js: Any) -> None:
    out = 'running DP...\n{"tps": 0.5, "dp_s": 1.0}\nnoise\n{"tps": 0.16585575000000002, "stages": 8, "dp_s": 0.04, "total_s": 0.05}\n'
    data = js.parse_driver_line(out)
    assert data["tps"] == pytest.approx(0.16585575) and data["dp_s"] == 0.04
    assert js.parse_driver_line('{"tps": null, "stages": 0, "dp_s": 0.03, "total_s": 0.04}')["tps"] is None


def test_driver_line_errors(js: Any) -> None:
    with pytest.raises(ValueError, match="FAIL: too many ideals"):
        js.parse_driver_line("FAIL: too many ideals (current limit set at 40000); this isn't going to work...\n")
    with pytest.raises(ValueError, match="no JSON line"):
        js.parse_driver_line("")
    with pytest.raises(ValueError, match="lacks"):
        js.parse_driver_line('{"stages": 3}')


@pytest.mark.parametrize(
    ("piper_s", "ours_s", "expected"),
    [
        (0.1, 0.9, "yes"),  # max(1 s, Piper) = 1 s
        (0.1, 1.1, "no"),
        (6.0, 5.9, "yes"),  # Piper <= 10 s: max(1 s, Piper)
        (6.0, 6.1, "no"),
        (10.0, 9.9, "yes"),  # exactly 10 s is not "> 10 s"
        (50.0, 9.9, "yes"),  # Piper > 10 s: Piper / 5
        (50.0, 10.1, "no"),
    ],
)
def test_met_rule(js: Any, piper_s: float, ours_s: float, expected: str) -> None:
    assert js.met("ran", piper_s, ours_s, "optimal", 900.0) == expected


def test_met_needs_a_proof_and_a_piper_run(js: Any) -> None:
    assert js.met("ran", 50.0, 1.0, "feasible", 900.0) == "no"
    assert js.met("ran", 50.0, 1.0, "infeasible", 900.0) == "yes"
    assert js.met("not run", None, 1.0, "optimal", 900.0) == "-"
    assert js.met("error: FAIL: x", None, 1.0, "optimal", 900.0) == "-"
    # a timed-out Piper counts as its timeout, a lower bound on its time
    assert js.met("timeout", None, 179.0, "optimal", 900.0) == "yes"
    assert js.met("timeout", None, 181.0, "optimal", 900.0).startswith("no (Piper timed out")
    assert js.target_text(50.0) == "<= Piper/5 = 10 s" and js.target_text(0.2) == "<= max(1 s, Piper) = 1 s"


def test_agreement(js: Any) -> None:
    assert js.agreement("optimal", 1.0, "ran", 1.0 + 1e-12) == "yes"
    assert js.agreement("optimal", 1.0 + 5e-10, "ran", 1.0) == "yes"
    assert js.agreement("optimal", 24.0314, "ran", 24.6259).startswith("yes (ours better by")
    assert js.agreement("optimal", 1.01, "ran", 1.0).startswith("NO (ours worse")
    assert js.agreement("infeasible", None, "ran", None) == "yes (both infeasible)"
    assert js.agreement("infeasible", None, "ran", 3.0).startswith("NO")
    assert js.agreement("optimal", 2.0, "ran", None).startswith("yes (ours better")
    assert js.agreement("time_limit", None, "ran", 3.0).startswith("NO")
    assert js.agreement("optimal", 1.0, "not run", None) == "-"
    assert js.readme_agrees("ran", 0.16585575000000002, 0.16585575) is True
    assert js.readme_agrees("ran", None, None) is True and js.readme_agrees("ran", 1.0, None) is False
    assert js.readme_agrees("ran", 1.0, "-") is None and js.readme_agrees("not run", None, 1.0) is None


def test_memory_bytes_match_the_cli(js: Any, tmp_path: Path) -> None:
    for gib in (1, 1.2, 1.5, 2.5, 80):
        assert js.memory_bytes(gib) == parse_bytes(f"{gib:g}GiB", "memory")
    cmd = js.ours_command(("gnmt.json", 4, 1.2, None), tmp_path / "r.json", 900.0)
    assert cmd[1:4] == ["-m", "milp_partition", "solve"]
    assert cmd[cmd.index("--memory") + 1] == "1.2GiB" and cmd[cmd.index("--devices") + 1] == "4"
    assert "--quiet" in cmd and cmd[cmd.index("--bandwidth") + 1] == "25GiB/s"


def test_cases_cover_the_shared_table_and_the_extra_row(js: Any) -> None:
    assert len(js.CASES) == 35 and js.CASES[18][:3] == ("resnet.json", 64, 4)
    assert sum(c[3] != "-" for c in js.CASES) == 18  # the shared table's rows; the others are not listed there
    assert len({c[:3] for c in js.CASES}) == 35  # no case twice
    assert [c[1] for c in js.selected_cases("resnet.json k=8 ")] == [8, 8, 8]
    assert len(js.selected_cases("bert32a100.json")) == 14 and len(js.selected_cases(None)) == 35


def test_no_piper_repository_is_not_run(js: Any, tmp_path: Path) -> None:
    assert "no Piper repository" in js.piper_sources(None)
    binary, why = js.build_piper(tmp_path / "missing", build=tmp_path / "build")
    assert binary is None and why == f"no Piper repository at {tmp_path / 'missing'}"
    assert not (tmp_path / "build").exists()
    checkout = tmp_path / "piper"
    checkout.mkdir()
    (checkout / "algo.cpp").write_text("int main() {}\n")
    assert "nlohmann/json.hpp" in js.piper_sources(checkout)
    (checkout / "nlohmann").mkdir()
    (checkout / "nlohmann" / "json.hpp").write_text("// header\n")
    assert set(js.piper_sources(checkout)) == {"algo.cpp", "nlohmann/json.hpp"}


def _row(**kw: Any) -> dict[str, Any]:
    row = {"file": "resnet.json", "k": 8, "memory_gib": 4, "readme_value": 73.4932860001, "piper_state": "ran",
           "piper_value": 73.4932860001, "piper_dp_s": 5.0, "piper_process_s": 5.1, "ours_status": "optimal",
           "ours_value": 73.4932860001, "ours_s": 2.0, "ratio": 2.5, "met": "yes", "agree": "yes", "piper_timeout_s": 900.0}  # fmt: skip
    row.update(kw)
    return row


def test_table_and_summary(js: Any) -> None:
    not_run = _row(piper_state="not run", piper_value=None, piper_dp_s=None, piper_process_s=None, ratio=None, met="-", agree="-")
    timeout = _row(
        k=16, piper_state="timeout", piper_value=None, piper_dp_s=None, piper_process_s=900.0, ratio=9.0, met="yes", agree="-"
    )
    flagged = _row(k=32, ours_status="time_limit", ours_value=None, met="no", agree="NO (ours has no plan)")
    table = js.table_lines([_row(), not_run, timeout, flagged])
    assert "| not run | not run | not run |" in table[3]
    assert "> 900 s" in table[4] and "| >= 9 |" in table[4] and "<= Piper/5 = 180 s" in table[4]
    assert "**time_limit** (no proof)" in table[5]
    summary = js.summary_lines([_row(), not_run, timeout, flagged])
    assert summary[0] == "**Target met in 2 / 3 cases** (1 not judged: Piper not run)."
    assert "resnet.json k=32 4 GiB" in summary[1] and "resnet.json k=32" in summary[2]
    assert (
        "in 2 / 2 listed cases" in summary[3]
    )  # Piper ran in two rows (its values are the README's); not run, timeout: not compared
