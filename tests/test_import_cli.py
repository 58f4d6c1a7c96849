"""``milp-partition import``: files written, the plan solved, bad input as one line with exit 2."""

from __future__ import annotations

import sys
import warnings

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.io.native import read_native

MODELS = "milp_partition.importers.models"


def _one_line_error(capsys, code: int, *needles: str) -> None:
    out = capsys.readouterr()
    assert code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    assert "Traceback" not in out.err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_import_help_lists_both_frameworks(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    out = capsys.readouterr().out
    assert "torch" in out and "onnx" in out


def test_import_then_solve_transformer(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    graph = tmp_path / "gpt.json"
    code = main(
        [
            *("import", "torch", f"{MODELS}:gpt_small_test", "--input-shape", "2x16:int64", "--training"),
            *("--granularity", "layer", "--profile", "H100", "--output", str(graph)),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "torch.export" in out and "36 nodes" in out
    instance = read_native(graph)
    assert sum(1 for n in instance.graph.nodes if n.is_backward) == 18
    result = tmp_path / "plan.json"
    code = main(
        ["solve", str(graph), "--devices", "4", "--memory", "80GiB", "--time-limit", "20", "--quiet", "--output", str(result)]
    )
    assert code == 0
    assert capsys.readouterr().out.startswith("optimal")


def test_import_onnx_cli(tmp_path, capsys) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from milp_partition.importers import models

    path = tmp_path / "mlp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(models.mlp_small_test().eval(), (torch.randn(4, 32),), str(path), dynamo=False)
    out_path = tmp_path / "mlp.json"
    code = main(["import", "onnx", str(path), "--granularity", "layer", "--profile", "A100", "-o", str(out_path)])
    assert code == 0
    assert "onnx.shape_inference" in capsys.readouterr().out
    assert len(read_native(out_path).graph.nodes) == 9


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        ([f"{MODELS}:no_such_factory", "--input-shape", "4x32"], ["has no factory 'no_such_factory'"]),
        (["no_such_pkg.models:mlp", "--input-shape", "4x32"], ["cannot import module 'no_such_pkg.models'"]),
        ([f"{MODELS}:mlp_small_test", "--input-shape", "4x33"], ["--input", "4x33 does not fit the model"]),
        ([f"{MODELS}:mlp_small_test", "--input-shape", "4xq"], ["--input", "4xq"]),
        ([f"{MODELS}:mlp_small_test"], ["--input"]),
        ([f"{MODELS}:mlp_small_test", "--input-shape", "4x32", "--profile", "Z80"], ["Z80"]),
        ([f"{MODELS}:mlp_small_test", "--input-shape", "4x32", "--dtype", "int8"], ["--dtype"]),
        (["tests.test_import_torch:DataDependent", "--input-shape", "2x4"], ["tracer cannot capture", "torch.export failed"]),
    ],
)
def test_bad_torch_input_is_one_line(tmp_path, capsys, argv, needles) -> None:
    pytest.importorskip("torch")
    code = main(["import", "torch", *argv, "-o", str(tmp_path / "g.json")])
    _one_line_error(capsys, code, *needles)


def test_corrupt_onnx_is_one_line(tmp_path, capsys) -> None:
    pytest.importorskip("onnx")
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x0a\x03abc\x12\xff garbage")
    code = main(["import", "onnx", str(bad), "-o", str(tmp_path / "g.json")])
    _one_line_error(capsys, code, "broken.onnx", "is not a valid ONNX model")


@pytest.mark.parametrize(("framework", "module", "model"), [("torch", "torch", "m:f"), ("onnx", "onnx", "model.onnx")])
def test_missing_extra_is_named(tmp_path, capsys, monkeypatch, framework: str, module: str, model: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import torch` / `import onnx` fail
    (tmp_path / "model.onnx").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    code = main(["import", framework, model, "--input-shape", "2x4", "-o", "g.json"])
    _one_line_error(capsys, code, f"pip install 'milp-partition[{module}]'")
