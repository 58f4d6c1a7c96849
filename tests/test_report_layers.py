"""Reports name the layers of each stage or device (issue 20 item 12)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from milp_partition.report import names_span
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, _tiny_piper


def test_names_span() -> None:
    assert names_span(["a", "b"]) == "a, b" and names_span([]) == "-"
    long = [f"block{i}.layer" for i in range(20)]
    assert names_span(long) == "block0.layer .. block19.layer (20 layers)"
    three = ["model.layers.1 (54 ops)", "model.layers.2 (54 ops)", "model.layers.3 (54 ops)"]
    assert names_span(three, 40) == "model.layers.1 (54 ops) .. model.layers.3 (54 ops) (3 layers)"  # no name twice


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


def test_joint_report_names_the_recomputed_layers(tmp_path: Path) -> None:
    """Issue 43 item 13: the table counted recomputed layers without naming them; a line per stage names them, from
    the result's configurations."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_tiny_piper()))
    out_file = tmp_path / "r.json"
    rc, out, _ = run_cli(["solve", str(path), "--memory", "6B", "--progress", "0", "--output", str(out_file)])
    assert rc == 0
    stages = json.loads(out_file.read_text())["stages"]
    names = {"0": "a", "1": "b", "2": "c"}
    for q, st in enumerate(stages):
        recomputed = [names[str(v)] for v in st["nodes"] if st["configs"][str(v)] != "vanilla"]
        line = [row for row in out.splitlines() if row.startswith(f"recomputed stage {q + 1}:")]
        assert line == ([f"recomputed stage {q + 1}: {', '.join(recomputed)}"] if recomputed else [])
    assert any(st["configs"][str(v)] != "vanilla" for st in stages for v in st["nodes"])  # the memory forces one


def test_a_training_graphs_device_rows_say_what_they_count(tmp_path: Path) -> None:
    """Issue 43 item 14: BERT-24's report said "gpu0 16 nodes" and listed 8 names; the header now says the count is
    of forward and backward nodes and the names are the forward ones, and both agree with the result."""
    out_file = tmp_path / "r.json"
    bert = REPO / "examples" / "bert24_training.json"
    rc, out, _ = run_cli(["solve", str(bert), "--solver", "none", "--progress", "0", "--output", str(out_file)])
    assert rc == 0 and "fw+bw" in out and "forward nodes (graph order" in out
    assignment = json.loads(out_file.read_text())["assignment"]
    data = json.loads(bert.read_text())
    backward = {str(n["id"]) for n in data["nodes"] if n["isBackwardNode"]}
    rows = out.split("forward nodes (graph order")[1].splitlines()[1:]
    for row in rows:
        dev, count, *_ = row.split()
        on = [v for v, d in assignment.items() if d == dev]
        assert int(count) == len(on)
        listed = row.split("  ")[-1].strip()
        forward = len(on) - len([v for v in on if v in backward])
        assert listed == "-" if forward == 0 else len(listed.split(", ")) == forward or "layers)" in listed


def test_the_report_names_a_node_by_the_key_the_result_and_the_api_use(tmp_path: Path) -> None:
    """Issue 43 item 14: the Python API and the result key Tarnawski's nodes by id (``'1'``) where the report printed
    only the name (``node1``): a node whose name does not start with its id is shown as ``name [id]``, and every
    bracketed id is a key of the result's assignment on that device."""
    from milp_partition.report import node_label

    assert node_label("1", "node1") == "node1 [1]" and node_label("h.4", "h.4 (26 ops)") == "h.4 (26 ops)"
    assert node_label("x", "") == "x" and node_label("x", "x") == "x"
    out_file = tmp_path / "r.json"
    bert = REPO / "examples" / "bert24_training.json"
    rc, out, _ = run_cli(["solve", str(bert), "--solver", "none", "--progress", "0", "--output", str(out_file)])
    assert rc == 0
    assignment = json.loads(out_file.read_text())["assignment"]
    rows = out.split("forward nodes (graph order")[1].splitlines()[1:]
    shown = 0
    for row in rows:
        dev = row.split()[0]
        for key in re.findall(r"\[([^\]]+)\]", row.split("  ")[-1]):
            assert assignment[key] == dev
            shown += 1
    assert shown >= len(rows) - 1  # every device with forward nodes names at least one by its key
