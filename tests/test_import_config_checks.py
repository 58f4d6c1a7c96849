"""``import hf``: a config is checked before a model is built (issue 43 items 10 and 11).

``n_embd`` 0, ``n_layer`` 2.5, "two" or -1, a 2**62 vocabulary were internal errors or imported; ``--set n_layerr=2``
imported 12 layers; a llama config with 3 key/value heads of 4 failed with "Cannot copy out of meta tensor".
Each is now exit 2 naming the flag or the file's field.  No model is built here (the checks come first).
"""

from __future__ import annotations

import json

import pytest

from milp_partition.cli.dispatch import main

pytest.importorskip("transformers")
pytest.importorskip("torch")


def _refused(capsys, argv: list[str], *needles: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("[import]")]  # progress lines aside
    assert "Traceback" not in err and len(lines) == 1, err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize(
    ("setting", "needles"),
    [
        ("n_layerr=2", ("--set n_layerr", "no field 'n_layerr'", "did you mean n_layer")),
        ("n_layer=-1", ("--set n_layer", "got -1")),
        ("n_layer=2.5", ("--set n_layer", "got 2.5")),
        ("n_layer=two", ("--set n_layer", "got 'two'")),
        ("n_embd=0", ("--set n_embd", "got 0")),
        (f"vocab_size={2**62}", ("--set vocab_size", str(2**62))),
        ("hidden_size=0", ("--set hidden_size", "got 0")),  # an alias of n_embd
    ],
)
def test_a_bad_set_is_refused_naming_the_key(tmp_path, capsys, setting: str, needles: tuple[str, ...]) -> None:
    out = tmp_path / "g.json"
    _refused(capsys, ["import", "hf", "gpt2", "--input", "1x16:int64", "--set", setting, "--output", str(out)], *needles)
    assert not out.exists()


@pytest.mark.parametrize(("field", "value"), [("n_embd", 0), ("n_layer", "two"), ("vocab_size", 2**62)])
def test_a_bad_field_of_a_config_file_is_refused_naming_the_file(tmp_path, capsys, field: str, value: object) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_layer": 2, field: value}))
    _refused(
        capsys,
        ["import", "hf", str(config), "--input", "1x16:int64", "--output", str(tmp_path / "g.json")],
        "config.json",
        f"field {field!r}",
    )


def test_key_value_heads_that_do_not_divide_the_heads_are_refused(tmp_path, capsys) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 1,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 3,
                "vocab_size": 100,
            }
        )
    )
    _refused(
        capsys,
        ["import", "hf", str(config), "--input", "1x16:int64", "--output", str(tmp_path / "g.json")],
        "num_key_value_heads 3 must divide num_attention_heads 4",
    )


def test_a_good_override_is_still_taken() -> None:
    from milp_partition.importers.hf import load_config

    config = load_config("gpt2", {"n_layer": 2, "hidden_size": 64, "n_head": 4})
    assert (config.n_layer, config.n_embd, config.n_head) == (2, 64, 4)


def test_an_input_too_large_to_build_is_refused_naming_the_flag(tmp_path, capsys) -> None:
    """``--input 99999999999999x32`` was an internal error (the example tensor cannot be allocated)."""
    _refused(
        capsys,
        [
            "import",
            "torch",
            "milp_partition.importers.models:gpt_small_test",
            "--input",
            "99999999999999x32",
            "--output",
            str(tmp_path / "g.json"),
        ],
        "--input",
        "99999999999999x32",
        "elements",
    )


def test_an_onnx_directory_is_named_a_directory(tmp_path, capsys) -> None:
    pytest.importorskip("onnx")
    _refused(capsys, ["import", "onnx", str(tmp_path), "--output", str(tmp_path / "g.json")], "is a directory")


def test_a_weightless_model_that_does_not_run_on_meta_is_refused_clearly() -> None:
    """``import hf t5`` fell back to the CPU with a meta model: "Cannot copy out of meta tensor"."""
    import torch

    from milp_partition.errors import InputError
    from milp_partition.importers.settings import ImportSettings
    from milp_partition.importers.torch_import import import_torch_model

    class DataDependent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if float(x.sum()) > 0:  # a value: no meta kernel gives it
                return self.lin(x)
            return self.lin(x) * 2

    with torch.device("meta"):
        module = DataDependent()
    with pytest.raises(InputError, match="built on the meta device") as info:
        import_torch_model(module, [torch.ones(2, 4)], ImportSettings(), name="dd")
    assert "Cannot copy out of meta tensor" not in str(info.value)


def test_import_hf_says_what_it_is_doing(tmp_path, capsys) -> None:
    """Issue 43 item 15: ``import hf`` printed nothing for 42 s; after its checks it prints its steps on stderr."""
    from tests.test_import_hf import TINY_GPT2

    code = main(["import", "hf", "gpt2", *TINY_GPT2, "--input", "1x16:int64", "--output", str(tmp_path / "g.json")])
    err = capsys.readouterr().err
    assert code == 0, err
    steps = [line for line in err.splitlines() if line.startswith("[import]")]
    assert [s.split("s  ", 1)[1].split()[0] for s in steps] == ["building", "capturing", "building"]
