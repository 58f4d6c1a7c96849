"""The per-configuration memory model derived from PaSE's iteration domains."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from milp_partition.errors import InputError
from milp_partition.io.strategy_tables import read_strategy_tables, write_strategy_tables
from milp_partition.strategy.memory import (
    MemoryModelSettings,
    config_factors,
    layer_tensors,
    memory_per_config,
    parse_layer_name,
    with_memory,
)
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem

STRATEGY = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "strategy"
FILES = sorted(p.name for p in STRATEGY.glob("*_p*.json"))


def _node(node_id: str, name: str, configs: list[str]) -> StrategyNode:
    return StrategyNode(node_id, name, tuple(configs), np.zeros(len(configs)))


def _single(name: str, configs: list[str], source: str = "tiny.json") -> StrategyProblem:
    return StrategyProblem((_node("L", name, configs),), (), source=source)


@pytest.fixture(scope="module")
def problems() -> dict[str, StrategyProblem]:
    return {name: read_strategy_tables(STRATEGY / name) for name in FILES}


def test_parse_layer_name() -> None:
    assert parse_layer_name("Conv(dom=128x3x55x55x11x11x96)") == ("Conv", (128, 3, 55, 55, 11, 11, 96))
    assert parse_layer_name("FC(dom=4)") == ("FC", (4,))
    assert parse_layer_name("conv1") is None
    assert parse_layer_name("Conv(dom=12x)") is None


def test_fc_by_hand() -> None:
    # FC domain (batch 8, out 6, in 4): weight in x out = 24, output batch x out = 48
    problem = _single("FC(dom=8x6x4)", ["1x1x1", "2x1x1", "1x2x1", "1x1x2", "1x3x2", "5x1x1"])
    got = memory_per_config(problem)["L"].tolist()
    # 4 bytes * (3 * weight + output) per device; 5x1x1 rounds 8/5 up to 2 rows
    assert got == [
        4 * (3 * 24 + 48),
        4 * (3 * 24 + 24),
        4 * (3 * 12 + 24),
        4 * (3 * 12 + 48),
        4 * (3 * 4 + 16),
        4 * (3 * 24 + 12),
    ]
    assert got == [480, 384, 240, 336, 112, 336]


def test_conv_by_hand() -> None:
    # Conv domain (b=2, c=3, h=5, w=5, r=3, s=3, n=4): weight c*r*s*n = 108, output b*n*h*w = 200
    configs = ["1x1x1x1x1x1x1", "2x1x1x1x1x1x2", "1x3x1x1x1x1x1", "1x1x1x1x3x1x1"]
    problem = _single("Conv(dom=2x3x5x5x3x3x4)", configs)
    assert memory_per_config(problem)["L"].tolist() == [
        4 * (3 * 108 + 200),
        4 * (3 * 54 + 50),
        4 * (3 * 36 + 200),
        4 * (3 * 36 + 200),
    ]
    settings = MemoryModelSettings(bytes_per_element=2, optimizer_state_factor=1.0, keep_activations=False)
    assert memory_per_config(problem, settings)["L"].tolist() == [216, 108, 72, 72]
    half = MemoryModelSettings(bytes_per_element=1, optimizer_state_factor=0.5, keep_activations=False)
    assert memory_per_config(_single("Conv(dom=1x1x1x1x1x1x3)", ["1x1x1x1x1x1x1"]), half)["L"].tolist() == [2]  # ceil(1.5)


def test_alexnet_first_conv_by_hand(problems: dict[str, StrategyProblem]) -> None:
    problem = problems["alexnet_p4.json"]
    node = problem.nodes[0]
    assert node.name == "Conv(dom=128x3x55x55x11x11x96)"
    memory = dict(zip(node.configs, memory_per_config(problem)["0"].tolist()))
    weight, output = 3 * 11 * 11 * 96, 128 * 96 * 55 * 55
    assert memory["1x1x1x1x1x1x1"] == 4 * (3 * weight + output)
    assert memory["4x1x1x1x1x1x1"] == 4 * (3 * weight + output // 4)
    assert memory["1x1x1x1x1x1x2"] == 4 * (3 * weight // 2 + output // 2)


def test_transformer_layers_are_understood(problems: dict[str, StrategyProblem]) -> None:
    layers = layer_tensors(problems["transformer_p4.json"])
    by_name = {(lay.op_type, lay.domain): lay for lay in layers.values()}
    qkv = by_name[("Einsum", (3, 128, 8, 256, 64, 512))]
    assert qkv.weights[0].sizes == (3, 8, 512, 64) and qkv.output.sizes == (3, 128, 8, 256, 64)
    merge = by_name[("Einsum", (128, 256, 512, 8, 64))]
    assert merge.weights[0].sizes == (8, 512, 64) and merge.output.sizes == (128, 256, 512)
    scores = by_name[("Einsum", (128, 8, 256, 256, 64))]
    assert scores.weights == () and scores.output.sizes == (128, 8, 256, 256)
    assert by_name[("Stack", (1, 128, 256, 512))].output.sizes == (3, 128, 256, 512)
    assert by_name[("Unstack", (1, 128, 8, 256, 64))].output.sizes == (3, 128, 8, 256, 64)


def test_inception_concat_lengths_match_the_next_layer(problems: dict[str, StrategyProblem]) -> None:
    problem = problems["inception3_p4.json"]
    layers = layer_tensors(problem)
    names = {n.id: n.name for n in problem.nodes}
    checked = 0
    for e in problem.edges:
        if layers[e.source].op_type == "Concat" and names[e.target].startswith(("Conv", "Pooling", "ReduceMean")):
            assert layers[e.source].output.sizes[1] == layers[e.target].domain[1]
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("name", FILES)
def test_with_memory_on_every_table(name: str, problems: dict[str, StrategyProblem]) -> None:
    problem = problems[name]
    limited = with_memory(problem, memory_limit_bytes=8 * 2**30)
    assert limited.memory_limit_bytes == 8 * 2**30
    assert problem.memory_limit_bytes is None and all(n.memory_bytes is None for n in problem.nodes)
    assert limited.edges is problem.edges and limited.name == problem.name and limited.devices == problem.devices
    for old, new in zip(problem.nodes, limited.nodes):
        assert (old.id, old.configs) == (new.id, new.configs)
        assert new.cost is old.cost
        assert new.memory_bytes.dtype == np.int64 and new.memory_bytes.shape == (len(new.configs),)
        assert (new.memory_bytes > 0).all(), new.name


@pytest.mark.parametrize("name", FILES)
def test_refining_a_split_never_increases_memory(name: str, problems: dict[str, StrategyProblem]) -> None:
    problem = problems[name]
    memory = memory_per_config(problem)
    layers = layer_tensors(problem)
    pairs = 0
    for node in problem.nodes:
        factors = config_factors(node, len(layers[node.id].domain))
        # refines[i, j]: configuration j splits every dimension at least as finely as i (a multiple of it)
        refines = (factors[None, :, :] % factors[:, None, :] == 0).all(axis=2)
        mem = memory[node.id]
        assert (mem[None, :] <= mem[:, None])[refines].all(), node.name
        more_devices = refines & (factors.prod(axis=1)[None, :] > factors.prod(axis=1)[:, None])
        pairs += int(more_devices.sum())
    assert pairs > 0


def test_unknown_op_type_is_rejected() -> None:
    with pytest.raises(InputError) as err:
        with_memory(_single("Dropout(dom=8x6)", ["1x1"]))
    message = str(err.value)
    assert message.startswith("tiny.json: node 'L' (Dropout(dom=8x6))")
    assert "'Dropout'" in message and "not understood" in message


@pytest.mark.parametrize(
    ("name", "configs", "needle"),
    [
        ("conv1", ["1"], "not a PaSE layer name"),
        ("Conv(dom=8x6x4)", ["1x1x1"], "3-dimensional domain is not understood"),
        ("Einsum(dom=2x3)", ["1x1"], "'Einsum' with a 2-dimensional domain"),
        ("Einsum(dom=2x2x5x3x7)", ["1x1x1x1x1"], "fits neither"),
        ("Einsum(dom=2x2x4x4x1)", ["1x1x1x1x1"], "fits both"),
        ("Einsum(dom=3x8x4x16x4x20)", ["1x1x1x1x1x1"], "stacked Q/K/V"),
        ("ReduceMean(dom=8x6)", ["1x1"], "'ReduceMean'"),
        ("Concat(dom=8x6)", ["1x1"], "cannot tell the Concat axis"),
        ("Concat(dom=8x1)", ["1x1"], "at least two predecessors"),
        ("Stack(dom=1x8)", ["1x1"], "how many tensors it stacks"),
        ("Unstack(dom=1x8)", ["1x1"], "exactly one predecessor"),
        ("FC(dom=8x6x4)", ["1x1"], "not 3 positive split factors"),
        ("FC(dom=8x6x4)", ["1x0x1"], "not 3 positive split factors"),
    ],
)
def test_layers_the_model_does_not_understand(name: str, configs: list[str], needle: str) -> None:
    with pytest.raises(InputError) as err:
        with_memory(_single(name, configs))
    assert str(err.value).startswith(f"tiny.json: node 'L' ({name})"), str(err.value)
    assert needle in str(err.value)


def test_concat_with_a_missing_input_is_rejected(problems: dict[str, StrategyProblem]) -> None:
    problem = problems["inception3_p4.json"]
    concat = next(n.id for n in problem.nodes if n.name.startswith("Concat"))
    first_in = next(i for i, e in enumerate(problem.edges) if e.target == concat)
    broken = replace(problem, edges=problem.edges[:first_in] + problem.edges[first_in + 1 :])
    with pytest.raises(InputError, match=f"node '{concat}'.*successor .* reads"):
        with_memory(broken)


def test_bad_limit_and_settings() -> None:
    problem = _single("FC(dom=8x6x4)", ["1x1x1"])
    with pytest.raises(InputError, match="memory_limit_bytes"):
        with_memory(problem, memory_limit_bytes=-1)
    with pytest.raises(InputError, match="memory_limit_bytes"):
        with_memory(problem, memory_limit_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="bytes_per_element"):
        with_memory(problem, MemoryModelSettings(bytes_per_element=0))
    with pytest.raises(InputError, match="optimizer_state_factor"):
        with_memory(problem, MemoryModelSettings(optimizer_state_factor=float("nan")))


def test_settings_are_frozen() -> None:
    settings = MemoryModelSettings()
    with pytest.raises(AttributeError):
        settings.bytes_per_element = 2  # type: ignore[misc]


def test_memory_survives_a_round_trip(problems: dict[str, StrategyProblem], tmp_path: Path) -> None:
    limited = with_memory(problems["alexnet_p8.json"], memory_limit_bytes=123456789)
    path = tmp_path / "alexnet_mem.json"
    write_strategy_tables(limited, path)
    back = read_strategy_tables(path)
    assert back.memory_limit_bytes == 123456789
    for a, b in zip(limited.nodes, back.nodes):
        np.testing.assert_array_equal(a.memory_bytes, b.memory_bytes)


def test_reshape_layers_count_their_whole_domain() -> None:
    # a two-layer chain: Ravel then Unravel, memory equals their whole domains
    nodes = (_node("a", "Ravel(dom=4x6)", ["1x1", "2x1"]), _node("b", "Unravel(dom=24)", ["1", "2"]))
    problem = StrategyProblem(nodes, (StrategyEdge("a", "b", np.zeros((2, 2))),))
    memory = memory_per_config(problem)
    assert memory["a"].tolist() == [96, 48] and memory["b"].tolist() == [96, 48]
