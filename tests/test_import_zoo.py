"""The models users bring: Hugging Face transformers built from configs, torch's own layers, custom functions.

Small configs (a few layers, width 64) keep this fast; ``benchmarks/models_bench.py`` runs the
full sizes.  References are closed forms from the config or from module shapes
(:mod:`milp_partition.importers.zoo`), never the importer's own counter.  timm and torchvision
are not covered: the PyPI torchvision wheel does not load beside the pinned CPU torch, and timm
imports torchvision; transformers' own vision models and the hand-written ones stand in.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from milp_partition.importers import ImportSettings  # noqa: E402
from milp_partition.importers import models as M  # noqa: E402
from milp_partition.importers import zoo as Z  # noqa: E402
from milp_partition.importers.build import BACKWARD_SUFFIX, build_graph  # noqa: E402
from milp_partition.importers.torch_capture import capture_module  # noqa: E402
from milp_partition.importers.torch_import import make_inputs, parse_input_shape  # noqa: E402

B, S = 2, 16


def _ids(seq: int = S) -> torch.Tensor:
    return torch.randint(0, 1000, (B, seq), generator=torch.Generator().manual_seed(0))


def _image() -> torch.Tensor:
    return torch.randn(B, 3, 32, 32, generator=torch.Generator().manual_seed(0))


#: name -> (factory, positional inputs, named inputs, closed-form forward FLOPs of the model, repeated-block prefix)
ZOO = {
    "gpt2": (Z.gpt2_small_test, lambda: [_ids()], dict, lambda m: Z.gpt2_forward_flops(m.config, B, S), "transformer.h."),
    "bert": (Z.bert_small_test, lambda: [_ids()], dict, lambda m: Z.bert_forward_flops(m.config, B, S), "bert.encoder.layer."),
    "llama": (Z.llama_small_test, lambda: [_ids()], dict, lambda m: Z.llama_forward_flops(m.config, B, S), "model.layers."),
    "t5": (
        Z.t5_small_test,
        lambda: [_ids()],
        lambda: {"decoder_input_ids": _ids(8)},
        lambda m: Z.t5_forward_flops(m.config, B, S, 8),
        "encoder.block.",
    ),
    "vit": (Z.vit_small_test, lambda: [_image()], dict, lambda m: Z.vit_forward_flops(m.config, B), None),
    "mobilenet_v2": (Z.mobilenet_v2_small_test, lambda: [_image()], dict, lambda m: Z.module_shape_flops(m, _image())[0], None),
    "convnext": (Z.convnext_small_test, lambda: [_image()], dict, lambda m: Z.module_shape_flops(m, _image())[0], None),
    "mobilenet_v3": (
        M.mobilenet_v3_small_test,
        lambda: [_image()],
        dict,
        lambda m: Z.module_shape_flops(m, _image())[0],
        "features.",
    ),
    "transformer_encoder": (
        lambda: M.transformer_encoder(64, 4, 2, 128),
        lambda: [torch.randn(B, S, 64)],
        dict,
        # per layer: q, k, v, out projections, attention, FFN
        lambda m: 2 * (2 * B * S * (4 * 64 * 64 + 2 * 64 * 128) + 4 * B * S * S * 64),
        "layers.",
    ),
}


@functools.cache
def _model(name: str):
    torch.manual_seed(0)
    return ZOO[name][0]()


@functools.cache
def _captured(name: str, training: bool, execute_on: str = "meta"):
    _, args, kwargs, _, _ = ZOO[name]
    settings = ImportSettings(training=training, execute_on=execute_on)  # type: ignore[arg-type]
    return capture_module(_model(name), args(), settings, name=name, kwargs=kwargs())


@pytest.mark.parametrize("name", list(ZOO))
def test_forward_flops_equal_closed_form_and_parameters_counted_once(name: str) -> None:
    """Default options at layer granularity: FLOPs = closed form, parameter bytes = the model's unique parameters."""
    model = _model(name)
    imported = build_graph(_captured(name, False), ImportSettings(granularity="layer"))
    expected = ZOO[name][3](model)
    assert imported.metadata["forward_flops"] == pytest.approx(expected, rel=1e-9) and expected > 0
    assert imported.metadata["reference_flops"]["forward"] == pytest.approx(expected, rel=1e-9)
    assert imported.total_param_bytes == Z.unique_parameter_bytes(model)
    assert imported.metadata["capture"] == "torch.export"
    assert not any("ran on the CPU" in n for n in imported.metadata["notes"]), imported.metadata["notes"]


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5"])
def test_default_cache_config_imports_and_says_so(name: str) -> None:
    """use_cache=True (the library default) is turned off on the copy, with a note; the caller's model keeps it."""
    model = _model(name)
    assert model.config.use_cache is True
    notes = _captured(name, False).notes
    assert any("use_cache=False" in n for n in notes)
    assert model.config.use_cache is True


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5"])
def test_tied_weights_stay_tied_and_are_said(name: str) -> None:
    model = _model(name)
    named = dict(model.named_parameters(remove_duplicate=False))
    assert sum(p.numel() * 4 for p in named.values()) > Z.unique_parameter_bytes(model)  # the model does tie
    captured = _captured(name, True)
    assert sum(op.param_bytes for op in captured.ops) == Z.unique_parameter_bytes(model) == captured.total_param_bytes
    assert any("tied parameter" in n for n in captured.notes)


@pytest.mark.parametrize("name", ["gpt2", "llama", "transformer_encoder"])
def test_attention_counted_on_the_cpu_path_as_on_meta(name: str) -> None:
    """On the CPU, scaled_dot_product_attention runs a fused kernel; its own formula keeps the count (forward and backward)."""
    meta, cpu = _captured(name, True, "meta"), _captured(name, True, "cpu")
    expected = ZOO[name][3](_model(name))
    for captured in (meta, cpu):
        assert sum(op.forward_flops for op in captured.ops) == pytest.approx(expected, rel=1e-9)
    meta_bwd = sum(op.backward_flops or 0.0 for op in meta.ops)
    assert sum(op.backward_flops or 0.0 for op in cpu.ops) == pytest.approx(meta_bwd, rel=1e-9)
    assert meta.reference_flops["backward"] == pytest.approx(meta_bwd, rel=1e-9)


def test_transformer_encoder_eval_fast_path_is_counted() -> None:
    """nn.TransformerEncoder in eval mode without grad takes a fused fast path; the import still counts its products."""
    model = _model("transformer_encoder").eval()
    imported = build_graph(_captured("transformer_encoder", False, "cpu"), ImportSettings(granularity="layer"))
    assert imported.metadata["forward_flops"] == pytest.approx(ZOO["transformer_encoder"][3](model), rel=1e-9)
    assert torch.backends.mha.get_fastpath_enabled()  # restored after the import


@pytest.mark.parametrize("name", ["mobilenet_v3", "convnext", "mobilenet_v2"])
def test_grouped_convolution_backward_equals_closed_form(name: str) -> None:
    """Backward of depthwise/grouped convolutions: input and weight gradients each cost the forward, not x groups."""
    model = _model(name)
    captured = _captured(name, True)
    fwd, bwd = Z.module_shape_flops(model, _image(), training=True)
    convs_linear_bwd = sum(op.backward_flops or 0.0 for op in captured.ops if "conv" in op.op_type or "linear" in op.op_type)
    assert convs_linear_bwd == pytest.approx(bwd, rel=1e-9)
    assert sum(op.forward_flops for op in captured.ops) == pytest.approx(fwd, rel=1e-9)


def test_grouped_depthwise_transposed_convolutions_backward() -> None:
    model = M.GroupedConvNet()
    x = torch.randn(2, 3, 16, 16)
    captured = capture_module(model, [x], ImportSettings(training=True), name="grouped")
    fwd, bwd = Z.module_shape_flops(model, x, training=True)
    assert sum(op.forward_flops for op in captured.ops) == pytest.approx(fwd, rel=1e-9)
    assert sum(op.backward_flops or 0.0 for op in captured.ops) == pytest.approx(bwd, rel=1e-9)
    assert captured.reference_flops["backward"] == pytest.approx(bwd, rel=1e-9)


def test_custom_autograd_function_is_detected_and_its_backward_counted() -> None:
    width, rows = 64, 8
    model = M.CustomFunctionMLP(width)
    captured = capture_module(model, [torch.randn(rows, width)], ImportSettings(training=True), name="custom")
    note = next(n for n in captured.notes if "custom autograd.Function" in n)
    assert "ScaledGELUFunction" in note
    traced = sum(op.backward_flops or 0.0 for op in captured.ops)
    # its own backward has one product more than autograd's derivative of the traced GELU: (rows x w) @ (w x w)
    assert captured.reference_flops["eager_backward"] - traced == pytest.approx(2 * rows * width * width)


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5", "mobilenet_v3", "transformer_encoder"])
def test_automatic_layer_depth_makes_repeated_blocks_nodes(name: str) -> None:
    captured = _captured(name, False)
    imported = build_graph(captured, ImportSettings(granularity="layer"))
    meta = imported.metadata
    ids = [n.id for n in imported.graph.nodes]
    prefix = ZOO[name][4]
    assert meta["layer_depth_automatic"] and meta["layer_depth"] >= 1
    assert sum(i.startswith(prefix) and i[len(prefix) :].isdigit() for i in ids) >= 2, ids
    total = meta["forward_flops"]
    for node in imported.graph.nodes:
        ops = [op for op in captured.ops if op.module_path == node.id or op.module_path.startswith(node.id + ".")]
        if (node.flops or 0.0) > 0.25 * total:  # only an indivisible node may hold more than a quarter
            assert all(op.module_path.count(".") + 1 <= meta["layer_depth"] for op in ops), node.id
    forced = build_graph(captured, ImportSettings(granularity="layer", layer_depth=1)).metadata
    assert forced["layer_depth"] == 1 and not forced["layer_depth_automatic"] and forced["nodes"] < meta["nodes"]


def test_bert_at_the_old_default_depth_collapses() -> None:
    """--layer-depth 2 still overrides: BERT's encoder becomes one node (why the default is now automatic)."""
    old = build_graph(_captured("bert", False), ImportSettings(granularity="layer", layer_depth=2)).metadata
    assert old["largest_node"] == "bert.encoder" and old["largest_node_share"] > 0.5


def test_training_edges_carry_what_crosses_a_stage_boundary() -> None:
    captured = _captured("gpt2", True)
    colocated = build_graph(captured, ImportSettings(training=True, granularity="layer")).graph
    free = build_graph(captured, ImportSettings(training=True, granularity="layer", colocate_backward=False)).graph
    act = {n.id: n.activation_bytes for n in colocated.nodes if not n.is_backward}
    for graph, colocated_flag in ((colocated, True), (free, False)):
        own = [e for e in graph.edges if e.target == e.source + BACKWARD_SUFFIX]
        assert len(own) == len(act)
        for e in own:
            assert e.bytes == (0 if colocated_flag else act[e.source])
        forward = {
            (e.source, e.target): e.bytes for e in graph.edges if not e.source.endswith(BACKWARD_SUFFIX) and e.target in act
        }
        backward = {
            (e.target.removesuffix(BACKWARD_SUFFIX), e.source.removesuffix(BACKWARD_SUFFIX)): e.bytes
            for e in graph.edges
            if e.source.endswith(BACKWARD_SUFFIX)
        }
        assert forward == backward and sum(forward.values()) > 0  # each gradient mirrors its activation


def test_named_inputs_and_realistic_integer_values() -> None:
    model = _model("bert")
    specs = [parse_input_shape(t) for t in ("input_ids=2x16:int64", "attention_mask=2x16:int64", "token_type_ids=2x16:int64")]
    assert specs[1].name == "attention_mask" and specs[1].shape == (2, 16) and specs[1].dtype == "int64"
    args, kwargs = make_inputs(specs, "float32", model=model)
    assert args == [] and list(kwargs) == ["input_ids", "attention_mask", "token_type_ids"]
    ids = kwargs["input_ids"]
    assert 0 <= int(ids.min()) and int(ids.max()) < model.config.vocab_size and len(set(ids.flatten().tolist())) > 1
    assert bool((kwargs["attention_mask"] == 1).all()) and bool((kwargs["token_type_ids"] == 0).all())
    captured = capture_module(model, args, ImportSettings(), name="bert", kwargs=kwargs)
    assert sum(op.forward_flops for op in captured.ops) == pytest.approx(Z.bert_forward_flops(model.config, 2, 16), rel=1e-9)
    positions = make_inputs([parse_input_shape("position_ids=2x5:int64")], "float32")[1]["position_ids"]
    assert positions.tolist() == [[0, 1, 2, 3, 4]] * 2


def test_cli_imports_a_default_config_model(tmp_path) -> None:
    from milp_partition.cli.dispatch import main

    out = tmp_path / "g.json"
    code = main(
        [
            "import",
            "torch",
            "milp_partition.importers.zoo:gpt2_small_test",
            "--input",
            "input_ids=2x16:int64",
            "--input",
            "attention_mask=2x16:int64",
            "--granularity",
            "layer",
            "--training",
            "--output",
            str(out),
        ]
    )
    assert code == 0 and out.is_file()
    text = out.read_text()
    assert "depth 3, automatic" in text and "use_cache=False" in text
