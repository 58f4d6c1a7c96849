"""Reports name the layers of each stage or device (issue 20 item 12)."""

from __future__ import annotations

import json
from pathlib import Path

from milp_partition.report import names_span
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, _tiny_piper


def test_names_span() -> None:
    assert names_span(["a", "b"]) == "a, b" and names_span([]) == "-"
    long = [f"block{i}.layer" for i in range(20)]
    assert names_span(long) == "block0.layer, block1.layer .. block18.layer, block19.layer (20 layers)"


def test_joint_report_names_each_stages_layers(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_tiny_piper()))
    rc, out, _ = run_cli(["solve", str(path), "--progress", "0"])
    assert rc == 0 and "recomputed  layers" in out
    rows = out.split("recomputed  layers")[1].strip().splitlines()
    assert rows[0].endswith("a, b") and rows[1].endswith("c")  # the two stages of the tiny three-layer chain


def test_pipeline_report_names_each_devices_nodes() -> None:
    rc, out, _ = run_cli(["solve", str(REPO / "examples" / "tiny.json"), "--solver", "none", "--progress", "0"])
    assert rc == 0 and "names (graph order)" in out
    gpu0 = next(line for line in out.splitlines() if line.startswith("gpu0 "))
    assert gpu0.startswith("gpu0") and "Input(3x224x224)" in gpu0 and gpu0.endswith("(10 layers)")
