"""Every ``examples/*.py`` runs from the repository root, exits 0 and prints the status it should.

Each example is small enough that its solve ends long before its time limit, so the proven status is asserted
(nothing here depends on how fast the machine is).  After python-mip's ``test/examples_test.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.py"))

#: The line each example must print.
EXPECTED = {
    "calibrate.py": "status optimal",
    "import_torch.py": "status optimal",
    "joint.py": "status optimal",
    "pipeline.py": "status optimal",
    "placement.py": "status optimal",
    "strategy.py": "status optimal",
}


def test_every_example_has_an_expectation() -> None:
    assert {p.name for p in EXAMPLES} == set(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    if path.name == "import_torch.py":
        pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(path.relative_to(REPO))], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert EXPECTED[path.name] in proc.stdout.splitlines(), proc.stdout
