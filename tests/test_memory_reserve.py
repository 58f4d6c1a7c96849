"""--memory-reserve keeps room free of the plan; a plan within 5% of its memory limit is flagged (issue 20 item 13, issue 43 item 12)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, _tiny_piper

LAYERS = REPO / "examples" / "gpt4_layers.json"
TINY = REPO / "examples" / "tiny.json"


def test_strategy_reserve_lowers_the_limit_and_the_report_warns() -> None:
    base = ["solve", str(LAYERS), "--devices", "8", "--memory", "2GiB", "--progress", "0", "--time-limit", "30"]
    rc, out, _ = run_cli(base)
    assert rc == 0 and "memory limit 2.00 GiB" in out and "warning    each device uses" in out and "within 5%" in out
    rc, out, _ = run_cli([*base, "--memory-reserve", "100MiB"])
    assert rc == 0 and "memory limit 1.90 GiB" in out


def test_joint_reserve_and_warning(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_tiny_piper()))
    rc, out, _ = run_cli(["solve", str(path), "--progress", "0"])
    assert rc == 0 and "100 B each" in out
    rc, out, _ = run_cli(["solve", str(path), "--memory-reserve", "90B", "--progress", "0"])
    assert "10 B each" in out  # 100 B less the reserve
    assert rc in (0, 3)
    rc, out, _ = run_cli(["solve", str(path), "--memory", "10B", "--progress", "0"])
    assert rc == 0 and "warning    stage" in out  # a stage at 10 B of 10 B


def test_pipeline_reserve_applies_to_every_device() -> None:
    rc, out, _ = run_cli(["solve", str(TINY), "--memory-reserve", "1GiB", "--solver", "none", "--progress", "0"])
    assert rc == 0 and "15.00 GiB each" in out  # 16 GiB less 1 GiB


def test_a_reserve_that_leaves_nothing_is_refused() -> None:
    rc, _, err = run_cli(["solve", str(TINY), "--memory", "1GiB", "--memory-reserve", "2GiB", "--progress", "0"])
    assert rc == 2 and "--memory-reserve" in err and "nothing would be left" in err


def test_placement_refuses_the_reserve() -> None:
    from tests.fuzz_seeds import SHARED

    rc, _, err = run_cli(["solve", str(SHARED / "placement" / "example-1.json"), "--memory-reserve", "1GiB"])
    assert rc == 2 and "--memory-reserve: does not apply to the placement problem" in err


def test_the_joint_report_gives_the_step_and_memory_per_device(tmp_path: Path) -> None:
    """Issue 43 item 12: the joint report gave time per sample only; it gives the step of the global batch (N
    one-sample micro-batches at the verified time per sample), labels memory per device, and a plan within 5% of
    the limit names --memory-reserve."""
    data = _tiny_piper()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    out_file = tmp_path / "r.json"
    rc, out, _ = run_cli(["solve", str(path), "--memory", "10B", "--progress", "0", "--output", str(out_file)])
    assert rc == 0
    result = json.loads(out_file.read_text())
    n = data["mbsInBatch"]
    step = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(step) == 1 and f"global batch of N = {n} samples" in step[0]
    assert math.isclose(float(step[0].split()[1]), n * result["objective"], rel_tol=1e-7)
    assert "mem/device" in out
    assert "(per device)" in out and "--memory-reserve" in out
