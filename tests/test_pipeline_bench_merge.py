"""``benchmarks/pipeline_bench.py``'s merge of a partial run into the committed rows (no solving).

A column the run skipped keeps its earlier value; a column it ran and left empty (no incumbent) is empty: an earlier
run's incumbent must not stand beside this run's status.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "pipeline_bench.py"


@pytest.fixture(scope="module")
def pb() -> Any:
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports bench_charts beside it
    spec = importlib.util.spec_from_file_location("pipeline_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pipeline_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_merge_keeps_skipped_columns_and_clears_empty_ones(pb: Any) -> None:
    old = [
        {"instance": "a", "cbc_cold_status": "feasible", "cbc_cold_objective": 6081.8, "cpsat_cold_objective": 3.0},
        {"instance": "b", "cbc_cold_status": "optimal", "cbc_cold_objective": 2.0, "cpsat_cold_objective": 2.0},
    ]
    new = [
        {"instance": "a", "cbc_cold_status": "unknown", "cbc_cold_objective": None, "cpsat_cold_objective": 3.0},
        {"instance": "b", "cpsat_cold_objective": 2.0},  # --skip-cbc: no CBC columns at all
        {"instance": "c", "cpsat_cold_objective": 1.0},
    ]
    rows = pb.merge_rows(old, new, ["c", "a", "b"])
    assert [r["instance"] for r in rows] == ["c", "a", "b"]
    assert rows[1]["cbc_cold_status"] == "unknown" and rows[1]["cbc_cold_objective"] is None
    assert rows[2]["cbc_cold_status"] == "optimal" and rows[2]["cbc_cold_objective"] == 2.0
