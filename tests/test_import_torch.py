"""PyTorch import: FLOPs and parameter bytes against FlopCounterMode, both granularities, training graphs, errors."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from milp_partition.errors import InputError  # noqa: E402
from milp_partition.importers import ImportSettings, build_graph, write_imported  # noqa: E402
from milp_partition.importers import models as M  # noqa: E402
from milp_partition.importers.build import BACKWARD_SUFFIX  # noqa: E402
from milp_partition.importers.torch_capture import capture_module  # noqa: E402
from milp_partition.importers.torch_import import (  # noqa: E402
    build_module,
    import_torch,
    import_torch_model,
    load_factory,
    parse_input_shape,
)
from milp_partition.io.native import read_native  # noqa: E402

# Small widths and shapes keep the suite fast; the layouts are the real ones
# (ResNet-50's 3-4-6-3 bottlenecks, 12 transformer blocks).
MODELS = {
    "mlp": (M.mlp_small_test, lambda: [torch.randn(4, 32)]),
    "resnet50": (M.resnet50_small_test, lambda: [torch.randn(2, 3, 32, 32)]),
    "gpt12": (M.gpt_small_test, lambda: [torch.zeros(2, 16, dtype=torch.long)]),
}


def _model(name: str):
    torch.manual_seed(0)
    factory, inputs = MODELS[name]
    return factory().eval(), inputs()


@functools.cache
def whole_model_flops(name: str, training: bool) -> float:
    """FlopCounterMode's total for the eager model: forward, plus backward of sum(output) when training."""
    module, inputs = _model(name)
    with FlopCounterMode(display=False) as counter:
        out = module(*inputs)
        if training:
            out.sum().backward()
    return float(counter.get_total_flops())


@functools.cache
def captured(name: str, training: bool):
    module, inputs = _model(name)
    return capture_module(module, inputs, ImportSettings(training=training), name=name)


@pytest.mark.parametrize("granularity", ["operator", "layer"])
@pytest.mark.parametrize("name", list(MODELS))
def test_forward_flops_and_parameters(name: str, granularity: str) -> None:
    imported = build_graph(captured(name, False), ImportSettings(granularity=granularity))
    module, _ = _model(name)
    assert imported.total_flops == whole_model_flops(name, False) > 0
    assert imported.total_param_bytes == sum(p.numel() * p.element_size() for p in module.parameters())
    assert imported.metadata["capture"] == "torch.export"
    assert not any(n.is_backward for n in imported.graph.nodes)
    assert all(n.forward_time > 0 for n in imported.graph.nodes if n.flops)  # H100 datasheet times


@pytest.mark.parametrize("name", list(MODELS))
def test_layer_granularity_groups_by_module(name: str) -> None:
    ops = build_graph(captured(name, False), ImportSettings(granularity="operator")).graph
    layers = build_graph(captured(name, False), ImportSettings(granularity="layer", layer_depth=2)).graph
    assert len(layers.nodes) < len(ops.nodes) or name == "mlp"
    if name == "gpt12":
        ids = [n.id for n in layers.nodes]
        assert [f"h.{i}" for i in range(12)] == [i for i in ids if i.startswith("h.")]
        shallow = build_graph(captured(name, False), ImportSettings(granularity="layer", layer_depth=1)).graph
        assert "h" in [n.id for n in shallow.nodes] and len(shallow.nodes) < len(layers.nodes)
    # bytes on a layer edge are tensors that cross: the edge into block h.1 carries one activation
    if name == "gpt12":
        into = [e for e in layers.edges if e.target == "h.1"]
        assert [e.bytes for e in into] == [2 * 16 * 128 * 4]


@pytest.mark.parametrize("granularity", ["operator", "layer"])
@pytest.mark.parametrize("name", list(MODELS))
def test_training_graph(name: str, granularity: str) -> None:
    imported = build_graph(captured(name, True), ImportSettings(training=True, granularity=granularity))
    graph = imported.graph
    forward = [n for n in graph.nodes if not n.is_backward]
    backward = {n.id: n for n in graph.nodes if n.is_backward}
    assert len(backward) == len(forward)
    # the traced backward of every node adds up to the whole model's backward
    assert imported.total_flops == whole_model_flops(name, True)
    for f in forward:
        b = backward[f.id + BACKWARD_SUFFIX]
        assert f.colocation_group == b.colocation_group == f.id
        assert b.backward_time >= 0 and b.forward_time == 0
        assert f.other_bytes >= 3 * f.param_bytes  # gradient + Adam moments
    assert sum(f.activation_bytes for f in forward) > 0
    pairs = {(e.source, e.target) for e in graph.edges}
    for e in graph.edges:
        if not e.source.endswith(BACKWARD_SUFFIX) and not e.target.endswith(BACKWARD_SUFFIX):
            assert (e.target + BACKWARD_SUFFIX, e.source + BACKWARD_SUFFIX) in pairs


def test_free_backward_and_ratio_settings() -> None:
    cap = captured("mlp", True)
    free = build_graph(cap, ImportSettings(training=True, colocate_backward=False, optimizer_state_bytes_per_param_byte=0))
    assert all(n.colocation_group is None for n in free.graph.nodes)
    assert all(n.other_bytes == 0 for n in free.graph.nodes)


def test_native_round_trip(tmp_path) -> None:
    imported = build_graph(captured("gpt12", True), ImportSettings(training=True, granularity="layer"))
    path = tmp_path / "gpt.json"
    write_imported(imported, str(path))
    assert read_native(path).graph == imported.graph
    assert "torch.export" in path.read_text()


def test_fx_fallback_when_export_fails(monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("export broke\nsecond line")

    monkeypatch.setattr(torch.export, "export", broken)
    module, inputs = _model("mlp")
    imported = import_torch_model(module, inputs, ImportSettings(granularity="layer"))
    assert imported.metadata["capture"] == "torch.fx.symbolic_trace"
    assert any("torch.export failed: export broke" in n for n in imported.metadata["notes"])
    assert imported.total_flops == whole_model_flops("mlp", False)
    assert imported.total_param_bytes == sum(p.numel() * 4 for p in module.parameters())


def test_fx_tracer_training_and_measure() -> None:
    module, inputs = _model("resnet50")
    settings = ImportSettings(training=True, measure=True, measure_repeats=1)
    imported = import_torch_model(module, inputs, settings, tracer="fx")
    assert imported.metadata["capture"] == "torch.fx.symbolic_trace"
    assert imported.total_flops == whole_model_flops("resnet50", True)
    assert imported.metadata["times"].startswith("measured")
    assert sum(n.forward_time for n in imported.graph.nodes) > 0
    assert sum(n.backward_time for n in imported.graph.nodes) > 0


def test_import_torch_returns_graph() -> None:
    module, inputs = _model("mlp")
    graph = import_torch(module, inputs)
    assert len(graph.nodes) == 9 and graph.time_unit == "ms"


class DataDependent(torch.nn.Module):
    """Branches on a tensor's value: neither torch.export nor FX can capture it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.lin(x)
        return -x


def test_untraceable_model_is_named() -> None:
    with pytest.raises(InputError, match=r"tracer cannot capture.*torch\.export failed.*symbolic_trace failed"):
        import_torch_model(DataDependent(), [torch.ones(2, 4)])


def test_shape_that_does_not_fit() -> None:
    module, _ = _model("mlp")
    with pytest.raises(InputError, match=r"--input: input shape 4x33 does not fit the model: mat1 and mat2"):
        import_torch_model(module, [torch.randn(4, 33)], name="mlp")


def test_factories_and_shapes() -> None:
    with pytest.raises(InputError, match=r"has no factory 'nope'.*defines: .*gpt"):
        load_factory("milp_partition.importers.models:nope")
    with pytest.raises(InputError, match="cannot import module 'no_such_module_xyz'"):
        load_factory("no_such_module_xyz:f")
    with pytest.raises(InputError, match="MODULE:FACTORY"):
        load_factory("justaname")
    assert isinstance(build_module("milp_partition.importers.models:mlp_small_test"), torch.nn.Module)
    assert parse_input_shape("8x128:int64").shape == (8, 128)
    assert parse_input_shape("8X3x4").dtype is None
    for bad in ("8x-1", "axb", ""):
        with pytest.raises(InputError, match="--input"):
            parse_input_shape(bad)


@pytest.mark.parametrize("name", ["resnet50"])
def test_meta_and_cpu_execution_agree(name: str) -> None:
    module, inputs = _model(name)
    meta = captured(name, True)
    cpu = capture_module(module, inputs, ImportSettings(training=True, execute_on="cpu"), name=name)
    assert "FLOPs and bytes from shapes (meta device)" in meta.notes
    assert [(o.id, o.forward_flops, o.backward_flops, o.input_bytes, o.output_bytes, o.param_bytes) for o in meta.ops] == [
        (o.id, o.forward_flops, o.backward_flops, o.input_bytes, o.output_bytes, o.param_bytes) for o in cpu.ops
    ]
    # eval-mode batch norm saves its (empty on the CPU) statistics with their full size on meta
    saved_meta = sum(o.saved_bytes or 0 for o in meta.ops)
    saved_cpu = sum(o.saved_bytes or 0 for o in cpu.ops)
    assert saved_cpu <= saved_meta <= 1.1 * saved_cpu
    # the caller's module is not moved or cast
    assert next(module.parameters()).device.type == "cpu"


def test_meta_falls_back_to_cpu() -> None:
    class ItemInForward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * float(x.shape[0])

    class NeedsValues(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) + torch.nonzero(x > 0).sum()

    imported = import_torch_model(NeedsValues(), [torch.ones(2, 4)], tracer="fx")
    assert any("ran on the CPU" in n for n in imported.metadata["notes"])
    assert imported.total_flops == 2 * 2 * 4 * 4
    plain = import_torch_model(ItemInForward(), [torch.ones(2, 4)])
    assert not any("ran on the CPU" in n for n in plain.metadata["notes"])


def test_model_without_operators() -> None:
    class Identity(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(InputError, match="Identity: the captured graph has no operators"):
        import_torch_model(Identity(), [torch.ones(2)])
