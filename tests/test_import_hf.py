"""``milp-partition import hf CONFIG``: a Hugging Face model from a config name or JSON, built on the meta device, no download."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from milp_partition.cli.dispatch import main

TINY_GPT2 = [
    "--set",
    "n_layer=2",
    "--set",
    "n_embd=64",
    "--set",
    "n_head=4",
    "--set",
    "vocab_size=1000",
    "--set",
    "n_positions=128",
]


@pytest.fixture(scope="module")
def gpt2_import(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "gpt2.json"
    code = main(
        ["import", "hf", "gpt2", *TINY_GPT2, "--input", "2x32:int64", "--training", "--granularity", "layer", "-o", str(out)]
    )
    return code, out


def test_a_model_type_imports_from_its_default_config_on_the_meta_device(gpt2_import, capsys):
    code, out = gpt2_import
    assert code == 0
    data = json.loads(out.read_text())
    assert "GPT2LMHeadModel (gpt2) built from the config on the meta device" in data["description"]
    assert any(n["id"].endswith(":bwd") for n in data["nodes"]) and "training graph" in data["description"]
    assert data["layers"]["ops"] and "warning" not in data["description"]


def test_a_config_json_imports_and_an_input_longer_than_the_positions_is_warned(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
                "max_position_embeddings": 16,
            }
        )
    )  # fmt: skip
    out = tmp_path / "llama.json"
    assert main(["import", "hf", str(config), "--input", "1x32:int64", "--granularity", "layer", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "warning: input 1 has 32 tokens, more than the model's 16 positions (config.max_position_embeddings)" in captured.err
    assert "LlamaForCausalLM (llama) built from the config on the meta device" in captured.out
    assert "more than the model's 16 positions" in json.loads(out.read_text())["description"]


def test_a_hub_name_is_refused_without_a_download_and_asks_for_the_config_json(tmp_path, capsys):
    code = main(["import", "hf", "meta-llama/Llama-2-7b-hf", "--input", "1x8:int64", "-o", str(tmp_path / "x.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "config.json" in err and "never" in err and len(err.strip().splitlines()) == 1
    assert main(["import", "hf", "gpt2", *TINY_GPT2, "-o", str(tmp_path / "x.json")]) == 2
    assert "--input 1x128:int64" in capsys.readouterr().err  # the example input uses the model's positions


def test_a_forward_only_import_is_not_planned_as_training(tmp_path, capsys):
    out = tmp_path / "fwd.json"
    assert main(["import", "hf", "gpt2", *TINY_GPT2, "--input", "2x32:int64", "--granularity", "layer", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["solve", str(out), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "-q"]) == 2
    err = capsys.readouterr().err
    assert "imported forward only" in err and "--training" in err
