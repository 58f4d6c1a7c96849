"""One flag name per concept for every problem (issue 20 item 15): --memory, --bandwidth, --microbatches; the old
spellings stay as aliases; the help of solve and import names the joint planner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, SHARED, _tiny_piper

TINY = REPO / "examples" / "tiny.json"
TABLES = SHARED / "strategy" / "alexnet_p8.json"


def _quiet(argv: list[str]) -> tuple[int, str]:
    rc, out, err = run_cli([*argv, "-q", "--progress", "0", "--solver", "none"])
    return rc, out + err


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (["--bandwidth", "1GB/s"], ["--link-bandwidth", "1GB/s"]),  # pipeline
        (["--memory", "1GiB"], ["--memory-limit", "1GiB"]),  # pipeline's old --memory is the same flag
    ],
)
def test_pipeline_takes_the_common_names_and_the_old_ones(new: list[str], old: list[str]) -> None:
    a, b = _quiet(["solve", str(TINY), *new]), _quiet(["solve", str(TINY), *old])
    assert a[0] == b[0] and a[1].split("seconds=")[0] == b[1].split("seconds=")[0]


def test_strategy_memory_limit_is_memory() -> None:
    a = _quiet(["solve", str(TABLES), "--memory", "400MiB"])
    b = _quiet(["solve", str(TABLES), "--memory-limit", "400MiB"])
    assert a[0] == b[0] == 0 and a[1].split("seconds=")[0] == b[1].split("seconds=")[0]
    assert run_cli(["solve", str(TABLES), "--memory", "1MiB", "-q", "--progress", "0"])[0] == 3  # the limit applies


def test_joint_microbatches_and_its_old_spelling(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_tiny_piper()))
    a = _quiet(["solve", str(path), "--microbatches", "2"])
    b = _quiet(["solve", str(path), "--micro-batches", "2"])
    assert a[0] == b[0] == 0 and a[1].split("seconds=")[0] == b[1].split("seconds=")[0]


def test_a_refused_flag_is_named_by_its_common_name() -> None:
    rc, _, err = run_cli(["solve", str(SHARED / "placement" / "example-1.json"), "--link-bandwidth", "1GB/s"])
    assert rc == 2 and "--bandwidth: does not apply to the placement problem" in err


def test_gap_takes_microbatches(tmp_path: Path) -> None:
    rc, _, _ = run_cli(["gap", "nothing.json", "--microbatches", "x", "--output-dir", str(tmp_path)])
    assert rc == 2


def test_help_names_the_joint_planner(capsys) -> None:
    for argv in (["solve", "--help"], ["import", "--help"]):
        rc, out, _ = run_cli(argv)
        assert rc == 0 and "--problem joint" in out and "joint planner" in out, argv


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["solve", str(TINY), "--optimizer-state-factor", "3"], "--optimizer-factor"),
        (["import", "hf", "gpt2", "--input", "1x8:int64", "--optimizer-factor", "3", "-o", "x.json"], "--optimizer-state-factor"),
    ],
)
def test_one_idea_under_two_names_is_refused_with_the_name_that_applies(argv: list[str], named: str) -> None:
    """Issue 43 item 15: --optimizer-factor (solve) and --optimizer-state-factor (import) name one idea."""
    rc, _out, err = run_cli(argv)
    assert rc == 2 and "Traceback" not in err
    assert f"name it {named}" in err or f"names it {named}" in err


def test_a_joint_solve_given_a_global_batch_is_told_about_microbatches(tmp_path: Path) -> None:
    """Issue 43 item 15: --global-batch (Galvatron) and --microbatches (joint) name one idea; the refusal names the
    flag of the problem at hand."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_tiny_piper()))
    rc, _, err = run_cli(["solve", str(path), "--global-batch", "64"])
    assert rc == 2 and "--global-batch" in err and "takes it as --microbatches" in err and "--objective run" in err
