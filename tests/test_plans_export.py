"""Plan files round-trip for every problem; exports to Galvatron, torchtitan and Megatron-LM, accepted by each engine's
own configuration code where it installs, and refused with the reason outside an engine's space (issue 41, item 4)."""

from __future__ import annotations

import itertools
import json
import typing
from pathlib import Path

import numpy as np
import pytest

from milp_partition.cli.dispatch import main
from milp_partition.galvatron.problem import GalvatronPlan
from milp_partition.io.export import ExportRefused, export
from milp_partition.io.export.galvatron import plan_from_config
from milp_partition.io.export.layout import RECOMPUTE, block_ids
from milp_partition.io.piper import read_joint
from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.io.plans import PLAN_FORMAT, read_plan, write_plan
from milp_partition.joint.problem import JointPlan, JointProblem, JointStage
from milp_partition.pipeline.problem import PipelineSolution
from milp_partition.placement.problem import PlacementSolution
from milp_partition.strategy.problem import StrategySolution

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


@pytest.fixture(scope="module")
def bert() -> JointProblem:
    return read_joint(SHARED / "joint" / "bert32a100.json")


def split(problem: JointProblem, blocks: list[int], d: int, t: int, recompute=lambda q, i: False) -> JointPlan:
    """A plan of ``problem``'s nodes in file order: stage q ends with its ``blocks[q]``-th block; recompute(q, i) says
    whether block i of stage q recomputes."""
    block = set(block_ids(problem))
    stages: list[list[str]] = [[] for _ in blocks]
    q, seen = 0, 0
    for n in problem.nodes:
        if n.id in block and seen == blocks[q]:
            q, seen = q + 1, 0
        stages[q].append(n.id)
        seen += n.id in block
    out = []
    for q, nodes in enumerate(stages):
        ids = [v for v in nodes if v in block]
        configs = {v: (RECOMPUTE if v in ids and recompute(q, ids.index(v)) else "vanilla") for v in nodes}
        out.append(JointStage(tuple(nodes), d, t, configs))
    return JointPlan(tuple(out))


# ---------------------------------------------------------------------------------------------------------------------
# plan files
# ---------------------------------------------------------------------------------------------------------------------


def test_plan_files_round_trip(tmp_path: Path, bert: JointProblem) -> None:
    cases = [
        ("pipeline", PipelineSolution({"a": "gpu0", "b": "gpu1"}), None),
        ("strategy", StrategySolution({"conv1": "n2c1", "fc": "n1c2"}), None),
        ("joint", split(bert, [16, 16], 2, 2, lambda q, i: i < 3), None),
    ]
    for kind, plan, problem in cases:
        path = tmp_path / f"{kind}.json"
        write_plan(path, kind, plan, problem)
        assert json.loads(path.read_text())["format"] == PLAN_FORMAT
        assert read_plan(path, kind, problem) == plan
    placement = read_placement_instance(SHARED / "placement" / "example-1.json")
    n = placement.num_tasks
    plan = PlacementSolution(np.arange(n) % len(placement.device_ids), np.linspace(0.0, 7.5, n))
    write_plan(tmp_path / "placement.json", "placement", plan, placement)
    back = read_plan(tmp_path / "placement.json", "placement", placement)
    assert isinstance(back, PlacementSolution)
    assert np.array_equal(back.device, plan.device) and np.array_equal(back.start, plan.start)
    shipped = SHARED / "galvatron" / "models" / "llama2-7b" / "galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json"
    galvatron_plan = plan_from_config(json.loads(shipped.read_text()))
    (tmp_path / "galvatron.json").write_text(json.dumps({"galvatron_config": json.loads(shipped.read_text())}))
    assert read_plan(tmp_path / "galvatron.json", "galvatron") == galvatron_plan


def test_a_plan_of_another_problem_or_a_bad_field_is_named(tmp_path: Path) -> None:
    from milp_partition.errors import InputError

    write_plan(tmp_path / "p.json", "pipeline", PipelineSolution({"a": "gpu0"}))
    with pytest.raises(InputError, match="a pipeline plan, not a strategy one"):
        read_plan(tmp_path / "p.json", "strategy")
    (tmp_path / "j.json").write_text(json.dumps({"stages": [{"nodes": ["1"], "data_parallel": 0, "tensor_parallel": 1}]}))
    with pytest.raises(InputError, match=r"stages\[0\].*.data_parallel. must be an integer from 1"):
        read_plan(tmp_path / "j.json", "joint")


# ---------------------------------------------------------------------------------------------------------------------
# exports: what they say, and what they refuse
# ---------------------------------------------------------------------------------------------------------------------


def test_megatron_export_of_an_even_plan(bert: JointProblem) -> None:
    out = export("megatron", bert, split(bert, [16, 16], 2, 4), global_batch_size=2 * bert.microbatches * 3)
    assert out["world_size"] == 16 and out["data_parallel_size"] == 2
    assert out["model_parallel_config"] == {
        "tensor_model_parallel_size": 4,
        "pipeline_model_parallel_size": 2,
        "sequence_parallel": False,
    }
    assert out["transformer_config"] == {"num_layers": 32}
    assert out["training"] == {"micro_batch_size": 3, "global_batch_size": 2 * bert.microbatches * 3}
    assert out["arguments"][:4] == ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2"]


def test_megatron_export_of_uneven_stages_and_recomputation(bert: JointProblem) -> None:
    out = export("megatron", bert, split(bert, [10, 12, 10], 1, 2, lambda q, i: i < 3))
    tc = out["transformer_config"]
    assert tc["pipeline_model_parallel_layout"] == "Et*10|t*12|t*10L"
    assert (tc["recompute_granularity"], tc["recompute_method"], tc["recompute_num_layers"]) == ("full", "block", 3)
    every = export("megatron", bert, split(bert, [16, 16], 1, 1, lambda q, i: True))["transformer_config"]
    assert (every["recompute_method"], every["recompute_num_layers"]) == ("uniform", 1)


@pytest.mark.parametrize("engine", ["megatron", "torchtitan"])
def test_plans_outside_an_engines_space_are_refused_with_the_reason(bert: JointProblem, engine: str) -> None:
    plan = split(bert, [16, 16], 2, 2)
    mixed = JointPlan((plan.stages[0], JointStage(plan.stages[1].nodes, 1, 4, plan.stages[1].configs)))
    with pytest.raises(ExportRefused, match=r"same data- and tensor-parallel degrees.*\(d=2, t=2\), \(d=1, t=4\)"):
        export(engine, bert, mixed)
    scattered = split(bert, [16, 16], 2, 2, lambda q, i: i % 2 == 1)  # every second block: no engine states that
    with pytest.raises(ExportRefused, match="recompute"):
        export(engine, bert, scattered)
    with pytest.raises(ExportRefused, match="not a multiple"):
        export(engine, bert, plan, global_batch_size=bert.microbatches * 2 + 1)


def test_torchtitan_export(bert: JointProblem) -> None:
    out = export("torchtitan", bert, split(bert, [12, 20], 2, 2, lambda q, i: True))
    par = out["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["tensor_parallel_degree"], par["pipeline_parallel_degree"]) == (2, 2, 2)
    parts = par["module_fqns_per_model_part"]
    assert parts[0][:2] == ["tok_embeddings", "layers.0"] and len(parts[0]) == 13
    assert parts[1][-3:] == ["layers.31", "norm", "output"] and len(parts[1]) == 22
    assert out["activation_checkpoint"] == "full"
    with pytest.raises(ExportRefused, match=r"checkpoints every block or none.*16 of 32"):
        export("torchtitan", bert, split(bert, [16, 16], 2, 2, lambda q, i: q == 0))


# ---------------------------------------------------------------------------------------------------------------------
# the engines' own configuration code accepts the exports (optional: skipped where the engine does not install)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", [[16, 16], [10, 12, 10]])
def test_megatron_core_accepts_the_export(bert: JointProblem, blocks: list[int]) -> None:
    pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install megatron-core --no-deps)")
    import torch
    from megatron.core import ModelParallelConfig
    from megatron.core.transformer import TransformerConfig

    out = export("megatron", bert, split(bert, blocks, 2, 2, lambda q, i: i < 2))
    mp = out["model_parallel_config"]
    ModelParallelConfig(**mp, pipeline_dtype=torch.bfloat16)
    config = TransformerConfig(  # the model's own sizes are not in a plan: a small model's here
        hidden_size=64, num_attention_heads=4, pipeline_dtype=torch.bfloat16, **mp, **out["transformer_config"]
    )
    assert config.num_layers == 32 and config.recompute_num_layers == 2


def test_torchtitan_accepts_the_export(bert: JointProblem) -> None:
    config = pytest.importorskip("torchtitan.config", reason="torchtitan is not installed (pip install torchtitan)")
    out = export("torchtitan", bert, split(bert, [12, 20], 2, 2), global_batch_size=2 * bert.microbatches)
    parallelism = config.ParallelismConfig(**out["parallelism"])  # its __post_init__ validates
    assert parallelism.pipeline_parallel_degree == 2
    config.TrainingConfig(**out["training"])
    try:
        from torchtitan.distributed.activation_checkpoint import ActivationCheckpointingConfig
    except ImportError as exc:
        pytest.skip(f"torchtitan's activation-checkpoint module does not import here: {exc}")
    modes = set()
    for option in typing.get_args(ActivationCheckpointingConfig):  # Annotated[Config, tyro.conf.subcommand(name)]
        modes |= {getattr(m, "name", None) for m in getattr(option, "__metadata__", ())}
    assert out["activation_checkpoint"] in modes and "full" in modes


# ---------------------------------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------------------------------


def test_solve_exports_the_proven_plan(tmp_path: Path, capsys) -> None:
    out = tmp_path / "megatron.json"
    instance = str(SHARED / "joint" / "bert32a100.json")
    code = main(
        ["solve", instance, "--devices", "8", "--time-limit", "30", "-q", "--export", "megatron", "--export-to", str(out)]
    )
    assert code == 0 and capsys.readouterr().out.startswith("optimal")
    data = json.loads(out.read_text())
    assert data["world_size"] <= 8 and data["transformer_config"]["num_layers"] == 32


def test_export_flags_are_refused_where_they_do_not_apply(tmp_path: Path, capsys) -> None:
    pipeline = str(SHARED / "pipeline" / "LayerGraphs" / "bert24_inference.json")
    assert main(["solve", pipeline, "--export", "megatron", "--export-to", str(tmp_path / "x.json")]) == 2
    assert "does not apply to the pipeline problem" in capsys.readouterr().err
    joint = str(SHARED / "joint" / "bert32a100.json")
    assert main(["solve", joint, "--devices", "8", "-q", "--export", "megatron"]) == 2
    assert "needs --export-to" in capsys.readouterr().err
    assert main(["solve", joint, "--devices", "8", "-q", "--export", "galvatron", "--export-to", str(tmp_path / "g.json")]) == 2
    assert "takes a galvatron plan" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


def test_galvatron_export_is_the_results_config() -> None:
    shipped = SHARED / "galvatron" / "models" / "llama2-7b" / "galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json"
    cfg = json.loads(shipped.read_text())
    plan = plan_from_config(cfg)
    assert isinstance(plan, GalvatronPlan)
    with pytest.raises(ExportRefused, match="takes a joint plan"):
        export("megatron", None, plan)


# ---------------------------------------------------------------------------------------------------------------------
# solve --space: the engine's proven optimum, against brute force on tiny chains
# ---------------------------------------------------------------------------------------------------------------------


def _engine_problem(seed: int) -> JointProblem:
    """A tiny random joint problem as a chain of one block type, configurations named plain / recomputing."""
    from dataclasses import replace

    from milp_partition.joint.problem import JointEdge, JointNode
    from tests.test_joint_bruteforce import random_problem

    p = random_problem(seed)
    ids = [n.id for n in p.nodes]
    have = {(e.source, e.target) for e in p.edges}
    edges = [*p.edges, *(JointEdge(u, v, 1.0) for u, v in itertools.pairwise(ids) if (u, v) not in have)]
    rename = {"c0": "vanilla", "c1": RECOMPUTE}
    nodes = [
        JointNode(n.id, "block", {t: tuple(replace(c, id=rename[c.id]) for c in cs) for t, cs in n.configs.items()})
        for n in p.nodes
    ]
    return replace(p, nodes=tuple(nodes), edges=tuple(edges))


def _in_space(plan: JointPlan) -> bool:
    flags = [c == RECOMPUTE for st in plan.stages for c in st.configs.values()]
    return len({(st.data_parallel, st.tensor_parallel) for st in plan.stages}) == 1 and (all(flags) or not any(flags))


@pytest.mark.parametrize("seed", range(40))
def test_space_search_matches_brute_force_over_the_engines_plans(seed: int) -> None:
    import math

    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.space import solve_in_space
    from milp_partition.result import Status
    from milp_partition.verifiers.joint import verify_joint
    from tests.test_joint_bruteforce import all_plans

    problem = _engine_problem(seed)
    best = math.inf
    for plan in all_plans(problem):
        if _in_space(plan):
            rep = verify_joint(problem, plan)
            if rep.feasible:
                best = min(best, rep.objective)
    result = solve_in_space(problem, JointSolveSettings(time_limit_s=30.0), "torchtitan")
    if math.isinf(best):
        assert result.status is Status.INFEASIBLE
        return
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(best, rel=1e-9)
    assert result.bound is not None and result.bound <= best * (1 + 1e-9)
    plan = JointPlan(
        tuple(JointStage(tuple(s["nodes"]), s["data_parallel"], s["tensor_parallel"], s["configs"]) for s in result.stages)
    )
    assert _in_space(plan) and verify_joint(problem, plan).feasible
    export("torchtitan", problem, plan)  # within the space: the export takes it
