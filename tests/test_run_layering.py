"""The run/ package imports without torch (its layer, on top, is in tests/test_layering.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_run_imports_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import milp_partition.run.launch, milp_partition.run.engine, milp_partition.cli.run, milp_partition.cli.dispatch\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr
