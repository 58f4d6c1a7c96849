"""The run/ package is a top layer: nothing below imports it, and it imports without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_layering import _files, _offenders

ROOT = Path(__file__).resolve().parents[1]


def test_nothing_below_imports_run() -> None:
    below = [
        f
        for f in _files("milp_partition")
        if not str(f.relative_to(ROOT)).startswith(("milp_partition/run/", "milp_partition/cli/"))
    ]
    assert not _offenders(below, ("milp_partition.run",))


def test_run_imports_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import milp_partition.run.launch, milp_partition.run.engine, milp_partition.cli.run, milp_partition.cli.dispatch\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr
