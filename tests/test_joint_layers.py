"""Joint problems from an imported PyTorch model (milp_partition.joint.layers): Megatron splits, recomputation, CLI."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from test_joint_bruteforce import brute_force
from test_joint_io import tiny

from milp_partition.calibration.profile import resolve_profile
from milp_partition.cli import main
from milp_partition.cli.joint import read_plan
from milp_partition.errors import InputError
from milp_partition.importers.build import write_imported
from milp_partition.importers.models import GPT, mlp
from milp_partition.importers.records import OpRecord
from milp_partition.importers.settings import ImportSettings
from milp_partition.importers.torch_import import import_torch_model, make_inputs, parse_input_shape
from milp_partition.io.imported_layers import read_layers
from milp_partition.io.piper import joint_from_dict, joint_to_dict
from milp_partition.joint.layers import (
    RECOMPUTE,
    VANILLA,
    LayerPlanSettings,
    joint_from_imported,
    layer_cost,
    parse_tp_degrees,
)
from milp_partition.joint.megatron import DegreeRefused, split_layer
from milp_partition.joint.problem import JointSolveSettings, joint_cluster
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint

# the small GPT: width D, H heads, sequences of S tokens, B sequences in the import batch, float32
D, H, S, B, VOCAB = 64, 4, 32, 2, 256
F32 = 4
GiB = 2**30


def _imported(tmp_path: Path, model: Any, shape: str, name: str, **settings: Any) -> dict[str, Any]:
    args, kwargs = make_inputs([parse_input_shape(shape)], "float32", model=model)
    imported = import_torch_model(model, args, ImportSettings(granularity="layer", training=True, **settings), kwargs=kwargs)
    path = tmp_path / f"{name}.json"
    write_imported(imported, str(path))
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def gpt_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    model = GPT(vocab=VOCAB, d_model=D, layers=2, heads=H, max_len=S)
    return _imported(tmp_path_factory.mktemp("gpt"), model, f"{B}x{S}:int64", "gpt", layer_depth=2)


def _settings(**kw: Any) -> LayerPlanSettings:
    return LayerPlanSettings(**{"devices": 8, "memory_bytes": 80 * GiB, **kw})


def _cost(data: dict[str, Any], node: str, t: int, recompute: bool = False):
    model = read_layers(data, "gpt")
    ops = model.layers[node][1]
    incoming = sum(b for _, v, b in model.edges if v == node)
    split = split_layer(ops, model.modules, t, last_layer=not any(u == node for u, _, _ in model.edges))
    return layer_cost(ops, split, t, model, resolve_profile("H100"), recompute=recompute, input_bytes=incoming)


def _config(problem, node: str, t: int, config_id: str):
    return next(c for c in problem.node(node).configs[t] if c.id == config_id)


def test_the_import_records_layer_shapes(gpt_data: dict[str, Any]) -> None:
    layers = gpt_data["layers"]
    assert layers["batch_size"] == B
    assert layers["modules"]["h.0.attn"]["heads"] == H
    assert layers["modules"]["h.0.fc"] == {"type": "Linear", "in_features": D, "out_features": 4 * D}
    assert {op["node"] for op in layers["ops"]} == {n["id"] for n in gpt_data["nodes"] if not n["is_backward"]}


def test_t1_matches_the_importer(gpt_data: dict[str, Any]) -> None:
    """At t = 1 a layer costs what the importer wrote for it (time of forward + backward node, activations, memory)."""
    problem = joint_from_imported(gpt_data, "gpt", _settings())
    unit = 1e-3  # the graph's times are in ms
    nodes = {n["id"]: n for n in gpt_data["nodes"]}
    for v in ("h.0", "h.1", "ln_f", "lm_head", "wte"):
        c = _config(problem, v, 1, VANILLA)
        fwd, bwd = nodes[v], nodes[v + ":bwd"]
        assert c.time_per_sample_s == pytest.approx((fwd["forward_time"] + bwd["backward_time"]) * unit / B, rel=1e-12)
        assert c.activation_bytes == pytest.approx(fwd["activation_bytes"] / B)
        assert c.parameter_bytes == fwd["param_bytes"]
        assert c.fixed_bytes == fwd["param_bytes"] + fwd["other_bytes"]  # weights + 3x (gradient, Adam moments) + buffers


def test_t2_halves_the_split_block_and_adds_the_ring_all_reduces(gpt_data: dict[str, Any]) -> None:
    one, two = _cost(gpt_data, "h.0", 1), _cost(gpt_data, "h.0", 2)
    # every counted FLOP of a block is in a split matrix product (QKV, attention, projection, MLP)
    assert two.forward_flops == pytest.approx(one.forward_flops / 2, rel=1e-12)
    assert two.backward_flops == pytest.approx(one.backward_flops / 2, rel=1e-12)
    # parameters: the four linear layers (with biases) split, the two layer norms replicated
    linear = (D * 3 * D + 3 * D) + (D * D + D) + (D * 4 * D + 4 * D) + (4 * D * D + D)
    norms = 2 * 2 * D
    assert one.param_bytes == (linear + norms) * F32
    assert two.param_bytes == (linear / 2 + norms) * F32
    assert two.fixed_bytes - one.fixed_bytes / 2 == pytest.approx(
        norms * F32 * 4 / 2 + 1024 / 2, abs=1
    )  # replicated norms + mask
    # Megatron: all-reduce forward after the projection and the MLP's second layer, backward before QKV and the first layer,
    # each of one activation (B x S x D floats) for the import batch
    act = B * S * D * F32
    assert one.allreduce_fw_bytes == 0 and one.allreduce_s == 0
    assert two.allreduce_fw_bytes == 2 * act and two.allreduce_bw_bytes == 2 * act
    h100 = resolve_profile("H100")
    ring = 2 * (2 - 1) / 2 * act * h100.allreduce.beta_s_per_byte + 2 * (2 - 1) * h100.allreduce.alpha_s
    assert two.allreduce_s == pytest.approx(4 * ring, rel=1e-12)
    assert two.time_per_sample_s == pytest.approx((two.forward_s + two.backward_s + two.allreduce_s) / B, rel=1e-12)
    # the split layers' activations halve; the inputs QKV and the MLP keep (and the norms') stay whole
    assert one.activation_bytes / 2 < two.activation_bytes < one.activation_bytes


def test_replicated_layers_keep_their_full_cost(gpt_data: dict[str, Any]) -> None:
    problem = joint_from_imported(gpt_data, "gpt", _settings())
    assert problem.degrees == (1, 2, 4)
    for v in ("wpe", "ln_f", "top#2"):  # position embedding, final norm, the embeddings' sum
        base = problem.node(v).configs[1]
        for t in (2, 4):
            assert problem.node(v).configs[t] == base
    # the LM head is split by vocabulary (256 outputs) with one backward all-reduce, no forward one
    head1, head2 = _cost(gpt_data, "lm_head", 1), _cost(gpt_data, "lm_head", 2)
    assert head2.param_bytes == head1.param_bytes / 2 and head2.forward_flops == head1.forward_flops / 2
    model = read_layers(gpt_data, "gpt")
    split = split_layer(model.layers["lm_head"][1], model.modules, 2, last_layer=True)
    assert split.allreduce_fw_bytes == () and split.allreduce_bw_bytes == (B * S * D * F32,)
    # the token embedding is split by vocabulary (its table halves) with a forward all-reduce of its output
    wte1, wte2 = _cost(gpt_data, "wte", 1), _cost(gpt_data, "wte", 2)
    assert wte1.param_bytes == VOCAB * D * F32 and wte2.param_bytes == VOCAB * D * F32 / 2
    assert wte2.allreduce_fw_bytes == B * S * D * F32 and wte2.allreduce_bw_bytes == 0


def test_recomputation_keeps_only_the_layer_input(gpt_data: dict[str, Any]) -> None:
    problem = joint_from_imported(gpt_data, "gpt", _settings())
    for t in (1, 2, 4):
        van, rec = _config(problem, "h.1", t, VANILLA), _config(problem, "h.1", t, RECOMPUTE)
        forward = _cost(gpt_data, "h.1", t)
        assert rec.activation_bytes == S * D * F32 < van.activation_bytes  # one sample's input to the block
        fw_allreduce = 0.0 if t == 1 else 2 * resolve_profile("H100").allreduce_time_s(B * S * D * F32, t)
        assert rec.time_per_sample_s - van.time_per_sample_s == pytest.approx((forward.forward_s + fw_allreduce) / B, rel=1e-9)
        assert (rec.parameter_bytes, rec.fixed_bytes) == (van.parameter_bytes, van.fixed_bytes)


def test_heads_not_divisible_refuse_the_degree(gpt_data: dict[str, Any]) -> None:
    model = read_layers(gpt_data, "gpt")
    with pytest.raises(DegreeRefused, match="4 heads, not divisible by 8"):
        split_layer(model.layers["h.0"][1], model.modules, 8)
    problem = joint_from_imported(gpt_data, "gpt", _settings(devices=16))
    assert problem.degrees == (1, 2, 4)
    assert any("degree 8 not offered" in n and "4 heads" in n for n in problem.notes)
    only8 = joint_from_imported(gpt_data, "gpt", _settings(devices=16, tp_degrees=(1, 8)))
    assert only8.degrees == (1,)


def _op(i: int, path: str, flops: float = 0.0, nbytes: int = 100, params: int = 0) -> OpRecord:
    return OpRecord(f"op{i}", "x", path, flops, 2 * flops, nbytes + params, nbytes, params, 0, nbytes)


def test_split_roles_on_written_layers() -> None:
    """Separate Q, K, V projections with a dropout after the output projection; a gated MLP (gate and up, then down)."""
    lin = {"type": "Linear"}
    modules = {
        "b.attn": {"type": "Attention", "heads": 8},
        **{f"b.attn.{n}": {**lin, "in_features": 16, "out_features": 16} for n in ("q", "k", "v", "o")},
        "b.mlp.gate": {**lin, "in_features": 16, "out_features": 48},
        "b.mlp.up": {**lin, "in_features": 16, "out_features": 48},
        "b.mlp.down": {**lin, "in_features": 48, "out_features": 16},
    }
    paths = ["b.norm", "b.attn.q", "b.attn.k", "b.attn.v", "b.attn", "b.attn", "b.attn.o", "b.attn", "b"]
    paths += ["b.mlp.gate", "b.mlp.up", "b.mlp", "b.mlp.down", "b"]
    ops = [_op(i, p, flops=5.0 if i == 4 else 0.0, params=10 if p in modules else 0) for i, p in enumerate(paths)]
    split = split_layer(ops, modules, 4)
    assert split.roles == (
        "replicated", "column", "column", "column", "inner", "inner", "row", "replicated", "replicated",
        "column", "column", "inner", "row", "replicated",
    )  # fmt: skip
    # one forward all-reduce per row layer (its output), one backward per column group (the group's input)
    assert split.allreduce_fw_bytes == (100.0, 100.0) and split.allreduce_bw_bytes == (100.0, 100.0)
    with pytest.raises(DegreeRefused, match="8 heads"):
        split_layer(ops, modules, 16)
    # a hidden width that t does not divide leaves the MLP replicated, with a note
    odd = {**modules, "b.mlp.gate": {**lin, "in_features": 16, "out_features": 50}}
    odd.update({"b.mlp.up": odd["b.mlp.gate"], "b.mlp.down": {**lin, "in_features": 50, "out_features": 16}})
    split = split_layer(ops, odd, 4)
    assert split.roles[9:13] == ("replicated",) * 4 and any("hidden width 50" in n for n in split.notes)
    assert split.allreduce_fw_bytes == (100.0,)


@pytest.mark.parametrize("factory", ["gpt2_small_test", "bert_small_test", "llama_small_test"])
def test_hugging_face_blocks_split_like_megatron(factory: str, tmp_path: Path) -> None:
    """GPT-2 (Conv1D layers), BERT (Q, K, V inside the attention module, its output projection in a sibling) and Llama
    (grouped-query attention whose head counts are in its config; a gated MLP): every linear layer of a block split,
    four all-reduces of the block's width."""
    pytest.importorskip("transformers")
    from milp_partition.importers import zoo

    data = _imported(tmp_path, getattr(zoo, factory)(), "2x16:int64", factory)
    model = read_layers(data, factory)
    block = next(v for v in model.layers if v.endswith(("layer.0", "layers.0", "h.0")))
    ops = model.layers[block][1]
    split = split_layer(ops, model.modules, 2)
    linear = {op.module_path[len(block) + 1 :]: r
              for op, r in zip(ops, split.roles) if model.modules.get(op.module_path, {}).get("type") == "Linear"}  # fmt: skip
    if factory == "gpt2_small_test":
        expected = {"attn.c_attn": "column", "attn.c_proj": "row", "mlp.c_fc": "column", "mlp.c_proj": "row"}
    elif factory == "bert_small_test":
        expected = {f"attention.self.{p}": "column" for p in ("query", "key", "value")} | {"attention.output.dense": "row"}
        expected |= {"intermediate.dense": "column", "output.dense": "row"}
    else:
        expected = {f"self_attn.{p}_proj": "column" for p in "qkv"} | {"self_attn.o_proj": "row"}
        expected |= {"mlp.gate_proj": "column", "mlp.up_proj": "column", "mlp.down_proj": "row"}
    assert linear == expected
    width = 64 * 2 * 16 * F32  # the block's input and output: 2 sequences of 16 tokens, width 64
    assert split.allreduce_fw_bytes == (width, width) and split.allreduce_bw_bytes == (width, width)
    if factory == "llama_small_test":  # 2 key/value heads
        with pytest.raises(DegreeRefused, match="2 kv heads, not divisible by 4"):
            split_layer(ops, model.modules, 4)


def test_tp_degrees_flag() -> None:
    assert parse_tp_degrees("4") == (1, 2, 4)
    assert parse_tp_degrees("1,8") == (1, 8)
    for bad in ("3", "1,3", "x", ""):
        with pytest.raises(InputError, match="--tp-degrees"):
            parse_tp_degrees(bad)


def test_dp_agrees_with_brute_force_on_a_generated_problem(tmp_path: Path) -> None:
    """A 5-layer MLP (the last layer split by outputs) on 4 devices, memory from loose to binding."""
    data = _imported(tmp_path, mlp(in_features=32, hidden=64, layers=2, classes=8), "4x32", "mlp")
    loose = joint_from_imported(data, "mlp", LayerPlanSettings(devices=4, memory_bytes=GiB, microbatches=2, tp_degrees=(1, 2)))
    assert loose.degrees == (1, 2) and len(loose.nodes) == 5
    # a valid joint instance: the native joint reader (all its checks) reads it back equal
    back = joint_from_dict(json.loads(json.dumps(joint_to_dict(loose))), "mlp")
    assert (back.nodes, back.edges, back.cluster) == (loose.nodes, loose.edges, loose.cluster)
    head = loose.nodes[-1]
    assert head.configs[2][0].parameter_bytes == head.configs[1][0].parameter_bytes / 2
    need = sum(min(c.fixed_bytes + c.activation_bytes for c in n.configs[2]) for n in loose.nodes)
    seen = set()
    for memory in (GiB, 1.3 * need, 0.8 * need, 0.45 * need, 0.05 * need):
        problem = replace(loose, cluster=joint_cluster(4, memory, loose.cluster.bandwidth_bytes_per_s), microbatches=2)
        expected = brute_force(problem)
        result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
        if math.isinf(expected):
            assert result.status == "infeasible"
            seen.add("infeasible")
            continue
        assert result.status == "optimal"
        assert result.objective == pytest.approx(expected, rel=1e-9)
        seen.add(round(expected, 15))
    assert len(seen) >= 3  # the memory limits give different optima


README_IMPORT = (
    "import torch milp_partition.importers.models:gpt_joint_example --input 1x2048:int64 --training "
    "--granularity layer --dtype bfloat16 --optimizer-state-factor 7 --output {gpt}"
)
README_SOLVE = "solve {gpt} --problem joint --devices 16 --memory 80GiB --output {result}"


def test_the_readme_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The two commands of the README's import example (docs/import.md, "Joint plan for your own PyTorch model"), end to end."""
    gpt, result = tmp_path / "gpt.json", tmp_path / "plan.json"
    assert main(README_IMPORT.format(gpt=gpt).split()) == 0
    assert main(README_SOLVE.format(gpt=gpt, result=result).split()) == 0
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "(verified)" in out
    r = json.loads(result.read_text())
    assert r["status"] == "optimal" and r["bound"] <= r["objective"] * (1 + 1e-12)
    data = json.loads(gpt.read_text())
    problem = joint_from_imported(data, str(gpt), LayerPlanSettings(devices=16, memory_bytes=80 * GiB))
    report = verify_joint(problem, read_plan(result))
    assert report.feasible and report.objective == pytest.approx(r["objective"], rel=1e-12)
    assert report.devices <= 16
    # memory binds: the model's weights and Adam state alone (16 bytes per parameter) do not fit on one device
    assert sum(min(c.fixed_bytes for c in n.configs[1]) for n in problem.nodes) > 80 * GiB
    assert main(["evaluate", str(gpt), str(result), "--problem", "joint", "--devices", "16", "--memory", "80GiB"]) == 0


def test_bad_input_exits_2(gpt_data: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({k: v for k, v in gpt_data.items() if k != "layers"}))
    assert main(["solve", str(bare), "--problem", "joint", "--devices", "4", "--memory", "1GiB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bare.json" in err[0] and "no 'layers' object" in err[0] and "milp-partition import" in err[0]
    good = tmp_path / "gpt.json"
    good.write_text(json.dumps(gpt_data))
    assert main(["solve", str(good), "--problem", "joint", "--devices", "4", "--memory", "1GiB", "--tp-degrees", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tp-degrees" in err[0] and "1, 2, 4, 8" in err[0]
    assert main(["solve", str(good), "--problem", "joint", "--memory", "1GiB"]) == 2
    assert "--devices" in capsys.readouterr().err
    broken = dict(gpt_data, layers=dict(gpt_data["layers"], batch_size=0))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken))
    assert main(["solve", str(bad), "--problem", "joint", "--devices", "4", "--memory", "1GiB"]) == 2
    assert "batch_size" in capsys.readouterr().err
    # the options of an imported graph are refused for a joint file that has its configurations already
    piper = tmp_path / "piper.json"
    piper.write_text(json.dumps(tiny()))
    assert main(["solve", str(piper), "--tp-degrees", "2"]) == 2
    assert "--tp-degrees" in capsys.readouterr().err


def test_non_finite_or_huge_values_on_the_imported_path(gpt_data: dict[str, Any], tmp_path: Path, capsys) -> None:
    """Issue 20 item 2: --bandwidth nan or a 1e308 field of the 'layers' object gave FEASIBLE, exit 0, objective null."""
    good = tmp_path / "gpt.json"
    good.write_text(json.dumps(gpt_data))
    base = ["solve", str(good), "--problem", "joint", "--devices", "4", "--memory", "1GiB", "--progress", "0"]
    from tests.fuzz_inputs import run_cli

    for bw in ("nan", "inf", "-1"):
        rc, _, err = run_cli([*base, f"--bandwidth={bw}"])
        assert rc == 2 and "--bandwidth" in err
    for where, value in (("param_bytes", 1e308), ("param_bytes", 10**400), ("forward_flops", 1e300)):
        ops = [dict(o) for o in gpt_data["layers"]["ops"]]
        ops[0][where] = value
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(dict(gpt_data, layers=dict(gpt_data["layers"], ops=ops))))
        assert main([*base[:1], str(bad), *base[2:]]) == 2
        err = capsys.readouterr().err
        assert where in err and "internal error" not in err, err
    for key, value in (("optimizer_state_bytes_per_param_byte", 1e17), ("batch_size", 10**400)):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(dict(gpt_data, layers=dict(gpt_data["layers"], **{key: value}))))
        assert main([*base[:1], str(bad), *base[2:]]) == 2
        err = capsys.readouterr().err
        assert key in err and "internal error" not in err, err


def test_misspelt_layers_fields_and_repeated_ops_are_refused(gpt_data: dict[str, Any]) -> None:
    """Issue 20 item 4: a misspelt field of the 'layers' object was ignored; an operator listed twice doubled its
    layer's costs."""
    layers = gpt_data["layers"]
    ops = layers["ops"]
    module = next(iter(layers["modules"]))
    for broken, named in (
        (dict(layers, optimizer_state_factor=3.0), "did you mean 'optimizer_state_bytes_per_param_byte'"),
        (dict(layers, ops=[dict(ops[0], forward_flop=1.0), *ops[1:]]), "did you mean 'forward_flops'"),
        (dict(layers, modules={**layers["modules"], module: {**layers["modules"][module], "in_feature": 3}}), "unknown field"),
        (dict(layers, ops=[*ops, dict(ops[0])]), "listed twice"),
    ):
        with pytest.raises(InputError, match=named):
            read_layers(dict(gpt_data, layers=broken), "gpt")


def test_a_forced_tensor_degree_not_offered_is_refused(
    gpt_data: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43 item 11: ``--tensor-parallel 2 --tp-degrees 1`` was "proven infeasible" (exit 3); it is a flag
    that contradicts another (exit 2, naming it)."""
    good = tmp_path / "gpt.json"
    good.write_text(json.dumps(gpt_data))
    argv = ["solve", str(good), "--problem", "joint", "--devices", "4", "--memory", "1GiB", "--tensor-parallel", "2"]
    assert main([*argv, "--tp-degrees", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tensor-parallel" in err[0] and "--tp-degrees" in err[0]
