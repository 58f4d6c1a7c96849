"""Galvatron's problem reads its deadline in every loop and enumerates the chunk counts as divisors, so a huge global
batch (16777216, 2147483648) ends at the time limit instead of looping over every integer up to it (issue 43,
item 9); a batch past 2**31 is refused at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from milp_partition.heuristics.galvatron_even import DeadlineReached, best_uniform, galvatron_even_split

from milp_partition.errors import InputError
from milp_partition.galvatron.dp import search
from milp_partition.galvatron.problem import GalvatronProblem, divisors, outer_choices
from milp_partition.galvatron.solve import GalvatronSolveSettings, solve_galvatron
from milp_partition.io.galvatron import read_galvatron


@pytest.fixture(scope="module")
def root(shared_benchmarks: Path) -> Path:
    return shared_benchmarks / "galvatron"


def _problem(root: Path, batch: int) -> GalvatronProblem:
    return read_galvatron(root / "models/llama2-7b", root / "hardware", devices=8, memory_mb=36 * 1024, global_batch=batch)


def test_divisors_match_brute_force() -> None:
    for n in range(1, 400):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(2**31) == [2**k for k in range(32)]


def test_outer_choices_of_a_huge_batch_are_its_divisors(root: Path) -> None:
    p = _problem(root, 2**31)
    got = outer_choices(p)
    assert got == [(pp, 2**k) for pp in (1, 2, 4, 8) for k in range(32) if 2**k >= pp]


def test_every_loop_stops_at_a_passed_deadline(root: Path) -> None:
    """A deadline already passed: the uniform heuristic returns what it has (nothing), the even-split baseline refuses
    to give a partial answer, the exact search reports a time-out and proves nothing."""
    p = _problem(root, 2**24)
    gone = time.monotonic() - 1.0
    assert best_uniform(p, gone) == (None, float("inf"))
    with pytest.raises(DeadlineReached):
        galvatron_even_split(p, gone)
    got = search(p, deadline=gone)
    assert got.timed_out and not got.infeasible and got.plan is None


def test_a_huge_batch_solve_stops_at_its_limit_without_a_false_proof(root: Path) -> None:
    """It returns (the old code looped over 2**31 chunk counts in the heuristic first); whatever a machine's speed, no
    bound above the verified value and no proof without one."""
    res = solve_galvatron(_problem(root, 2**31), GalvatronSolveSettings(time_limit_s=1.0))
    assert res.status in ("optimal", "feasible", "unknown")
    if res.objective is not None and res.bound is not None:
        assert res.bound <= res.objective * (1 + 1e-9)
    if res.status == "optimal":
        assert res.bound is not None


def test_a_batch_past_2_to_the_31_is_refused(root: Path) -> None:
    with pytest.raises(InputError, match="--global-batch"):
        _problem(root, 2**31 + 1)


def test_gap_baselines_on_a_huge_batch_end_at_their_limit(tmp_path: Path, root: Path) -> None:
    """In a child process with a generous cap: on the old code the baselines looped over 2**31 chunk counts."""
    setting = tmp_path / "huge.json"
    setting.write_text(
        json.dumps(
            {
                "format": "milp-partition-galvatron/1",
                "model": str(root / "models/llama2-7b"),
                "hardware": str(root / "hardware"),
                "devices": 8,
                "memory": "36GiB",
                "global_batch": 2**31,
            }
        )
    )
    code = (
        "import sys, json\n"
        "from milp_partition.sweep.jobs import GapJob\n"
        "from milp_partition.sweep.registry import execute\n"
        "rows = [execute(GapJob('galvatron', sys.argv[1], 'huge', 'x', (), m, time_limit_s=0.5))\n"
        "        for m in ('galvatron-even-split', 'uniform-even')]\n"
        "print(json.dumps(rows))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(setting)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        assert row["status"] in ("failed", "feasible"), row
        if row["status"] == "failed":
            assert "time limit" in row["message"], row
