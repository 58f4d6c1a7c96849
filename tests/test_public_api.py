"""The public API re-exported by ``milp_partition/__init__.py``: every name resolves, and importing the package is cheap."""

from __future__ import annotations

import subprocess
import sys

import milp_partition


def test_front_door_names() -> None:
    from milp_partition import Result, Status, solve_joint, solve_pipeline, solve_placement, solve_strategy

    assert callable(solve_pipeline) and callable(solve_strategy) and callable(solve_placement) and callable(solve_joint)
    assert Status.OPTIMAL == "optimal"
    assert Result.__module__ == "milp_partition.result"


def test_every_exported_name_resolves_to_its_home() -> None:
    for name in milp_partition.__all__:
        value = getattr(milp_partition, name)
        if name == "__version__":
            continue
        module = getattr(value, "__module__", None)
        assert module is not None and module.startswith("milp_partition."), (name, module)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        _ = milp_partition.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_dir_lists_the_public_names() -> None:
    assert {"solve_pipeline", "SolveSettings", "JointSolveSettings", "read_instance"} <= set(dir(milp_partition))


def test_import_is_cheap() -> None:
    """``import milp_partition`` loads no solver, no torch, not even numpy (a fresh interpreter)."""
    code = (
        "import sys, milp_partition; "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'ortools', 'pulp', 'torch', 'onnx', 'numpy', 'matplotlib', 'ray'}); "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import milp_partition loaded {out}"
