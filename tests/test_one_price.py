"""Issue 42 item 5: one price for one plan across problems.

On the same imported graph the pipeline problem (S stages on S accelerators, 1F1B) and the joint problem forced to
S x 1 x 1 without recomputation can express the same plans; they must price each the same (compute, messages with the
link's latency, one message per crossing edge each way: :mod:`milp_partition.costmodel.messages`) and so find the
same optimum.  The graph is a 4-layer Llama (``milp_partition.importers.zoo:llama_small_test``, one sample of 32
tokens), whose attention mask and rotary embedding reach every layer: a source node with several out-edges, where
counting per edge and per source node differ (needs the ``torch`` and ``zoo`` extras).  References are the other
problem's own verifier, never a number written here; the per-edge pricing itself is checked against brute force on
tiny random graphs.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.cluster import homogeneous_cluster
from milp_partition.errors import InputError
from milp_partition.graph import make_graph
from milp_partition.importers.timing import load_profile_spec
from milp_partition.io import read_instance
from milp_partition.joint.layers import LayerPlanSettings, joint_from_imported
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointSolveSettings, JointStage
from milp_partition.joint.solve import solve_joint
from milp_partition.pipeline.costs import per_edge_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.verifiers.joint import verify_joint
from milp_partition.verifiers.pipeline import verify_pipeline
from tests.brute_force import brute_force_pipeline
from tests.conftest import random_pipeline_problem

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MEMORY = 2**30
REL = 1e-9


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("oneprice") / "llama.json"
    args = ["import", "torch", "milp_partition.importers.zoo:llama_small_test", "--input", "1x32:int64", "--training"]
    assert main([*args, "--granularity", "layer", "--profile", "H100", "-o", str(out)]) == 0
    return out


def _pipeline(path: Path, stages: int, memory: int = MEMORY) -> PipelineProblem:
    graph = read_instance(path).graph
    settings = PipelineSettings(memory_model="1f1b", messages="per_edge")
    return PipelineProblem(graph, homogeneous_cluster(stages, memory), settings, source=str(path), samples_per_microbatch=1)


def _joint(path: Path, stages: int, memory: int = MEMORY) -> JointProblem:
    settings = LayerPlanSettings(devices=stages, memory_bytes=memory, tp_degrees=(1,), recompute=False)
    problem = joint_from_imported(json.loads(path.read_text()), str(path), settings)
    return JointProblem(
        problem.nodes, problem.edges, problem.cluster, problem.microbatches, source=str(path), shape=JointShape(stages, 1, 1)
    )


def _as_joint_plan(problem: PipelineProblem, assignment: dict[str, str], joint: JointProblem) -> JointPlan:
    """The pipeline's split as joint stages: accelerator i's forward nodes are stage i (d = t = 1, no recomputation)."""
    order = [n.id for n in joint.nodes]
    stages = []
    for dev in problem.cluster.devices:
        nodes = tuple(v for v in order if assignment[v] == dev.id)
        stages.append(JointStage(nodes, 1, 1, dict.fromkeys(nodes, "vanilla")))
    return JointPlan(tuple(stages))


def _as_split(problem: PipelineProblem, plan: JointPlan) -> PipelineSolution:
    """A joint plan of S x 1 x 1 as a split: stage i's layers and their backward nodes on accelerator i."""
    device = {v: problem.cluster.devices[i].id for i, st in enumerate(plan.stages) for v in st.nodes}
    return PipelineSolution({n.id: device[n.id.removesuffix(":bwd")] for n in problem.graph.nodes})


def _seconds(problem: PipelineProblem, value: float) -> float:
    assert problem.graph.time_unit == "ms"
    return value * 1e-3


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_each_problem_prices_the_others_optimum_the_same(llama, stages):
    pipe, joint = _pipeline(llama, stages), _joint(llama, stages)
    res = solve_pipeline(pipe, SolveSettings(time_limit_s=60))
    assert res.status == "optimal"
    plan = _as_joint_plan(pipe, res.assignment, joint)
    assert all(st.nodes for st in plan.stages)  # every accelerator holds a stage: the plan is S x 1 x 1
    by_joint = verify_joint(joint, plan)
    assert by_joint.feasible, by_joint.violations
    assert by_joint.objective == pytest.approx(_seconds(pipe, res.objective), rel=REL)
    for dev, stage in zip(pipe.cluster.devices, by_joint.stages, strict=True):  # stage by stage, time and memory
        assert stage.time_per_sample_s == pytest.approx(_seconds(pipe, res.loads[dev.id]), rel=REL)
        assert stage.memory_bytes == pytest.approx(res.memory_bytes[dev.id], rel=REL)

    jres = solve_joint(joint, JointSolveSettings(time_limit_s=60))
    assert jres.status == "optimal"
    jplan = JointPlan(tuple(JointStage(tuple(s["nodes"]), 1, 1, dict(s["configs"])) for s in jres.stages))
    by_pipeline = verify_pipeline(pipe, _as_split(pipe, jplan))
    assert by_pipeline.feasible, by_pipeline.violations
    assert _seconds(pipe, by_pipeline.objective) == pytest.approx(jres.objective, rel=REL)
    # the two search spaces coincide here (the pipeline's optimum uses every accelerator): one optimum
    assert jres.objective == pytest.approx(_seconds(pipe, res.objective), rel=REL)


def test_the_optima_agree_under_a_memory_limit_that_binds(llama):
    """Memory limits the split the same way in both problems (1F1B's s - i micro-batches is Piper's y)."""
    free = solve_pipeline(_pipeline(llama, 3), SolveSettings(time_limit_s=60))
    peak = max(free.memory_bytes.values())
    tight = int(peak * 0.97)  # the free optimum no longer fits
    pipe, joint = _pipeline(llama, 3, tight), _joint(llama, 3, tight)
    res = solve_pipeline(pipe, SolveSettings(time_limit_s=60))
    jres = solve_joint(joint, JointSolveSettings(time_limit_s=60))
    assert res.status == jres.status
    if res.status == "optimal":
        assert res.objective > free.objective  # the limit binds
        assert jres.objective == pytest.approx(_seconds(pipe, res.objective), rel=REL)


def test_a_message_is_charged_per_crossing_edge_with_its_latency(llama):
    """The price counts every crossing edge, each with the link's latency: a stage that receives the rotary embedding
    for two layers pays two messages (what the per-source-node count of Tarnawski's files would charge once)."""
    pipe = _pipeline(llama, 2)
    graph = pipe.graph
    forward = [n.id for n in graph.nodes if not n.is_backward]
    cut = forward.index("model.layers.2")  # layers 2 and 3 on the second accelerator with what follows them
    where = {v: ("gpu0" if i < cut else "gpu1") for i, v in enumerate(forward)}
    split = PipelineSolution({n.id: where[n.id.removesuffix(":bwd")] for n in graph.nodes})
    report = verify_pipeline(pipe, split)
    compute = sum(n.forward_time + n.backward_time for n in graph.nodes if split.assignment[n.id] == "gpu1")
    crossing = [e for e in graph.edges if split.assignment[e.source] != split.assignment[e.target]]
    assert sum(1 for e in crossing if e.source == "model.rotary_emb") == 2  # two layers read it across the cut
    alpha_ms = load_profile_spec("H100").links["d2d"].alpha_s * 1e3
    assert alpha_ms > 0 and all(e.transfer_time >= alpha_ms for e in crossing)  # the latency is in every message
    assert report.loads["gpu1"] == pytest.approx(compute + math.fsum(e.transfer_time for e in crossing), rel=REL)
    by_source = verify_pipeline(PipelineProblem(graph, pipe.cluster, PipelineSettings(memory_model="1f1b")), split)
    assert by_source.loads["gpu1"] < report.loads["gpu1"]  # the older count charges fewer messages


@pytest.mark.parametrize("link", [[], ["--bandwidth", "25GB/s"]], ids=["import's link", "bandwidth given"])
def test_the_command_line_prints_one_price_in_one_unit(llama, tmp_path, capsys, link):
    """``solve`` on the imported graph: the pipeline's report gives its time per sample in seconds, the joint's unit,
    and the joint forced to the pipeline optimum's shape reports the same number; with ``--bandwidth`` both keep the
    import's link latency (the pipeline's default link is the profile the graph was imported with, as the joint's)."""
    pipe_out, joint_out = tmp_path / "pipe.json", tmp_path / "joint.json"
    capsys.readouterr()
    assert main(["solve", str(llama), "--devices", "3", "--memory", "1GiB", *link, "-o", str(pipe_out)]) == 0
    report = capsys.readouterr().out
    forced = ["--problem", "joint", "--stages", "3", "--data-parallel", "1", "--tensor-parallel", "1", "-q"]
    assert main(["solve", str(llama), "--devices", "3", "--memory", "1GiB", *link, *forced, "-o", str(joint_out)]) == 0
    pipe, joint = json.loads(pipe_out.read_text()), json.loads(joint_out.read_text())
    assert pipe["time_unit"] == "ms" and joint["time_unit"] == "s"
    assert joint["objective"] == pytest.approx(pipe["objective"] * 1e-3, rel=REL)
    assert pipe["settings"]["messages"] == "per_edge"
    line = next((x for x in report.splitlines() if x.startswith("sample ")), "")
    assert line.split()[1:3] == [f"{pipe['objective'] * 1e-3:.10g}", "s"]


def _per_edge(seed: int, **kwargs: object) -> PipelineProblem:
    """A random tiny problem (:func:`tests.conftest.random_pipeline_problem`) with its own transfer time on each edge,
    priced per edge."""
    rng = random.Random(1000 + seed)
    base = random_pipeline_problem(seed, max_nodes=6, **kwargs)  # type: ignore[arg-type]
    edges = [replace(e, transfer_time=round(rng.uniform(0.0, 1.5), 3)) for e in base.graph.edges]
    graph = make_graph(list(base.graph.nodes), edges)
    return replace(base, graph=graph, settings=replace(base.settings, messages="per_edge"))


@pytest.mark.parametrize("seed", range(12))
def test_per_edge_pricing_is_solved_exactly(seed):
    """The chain solves per-edge messages through relay nodes (:func:`~milp_partition.pipeline.costs.per_edge_graph`):
    every split has the same value on the relay graph as per edge on the graph itself, and the chain's optimum is the
    brute-force optimum of the per-edge verifier (contiguous or not, 1F1B or static memory, binding memory, CPU cores)."""
    kwargs = [
        {},
        {"contiguous": False},
        {"backward": True, "memory_model": "1f1b"},
        {"binding_memory": True, "cpu_cores": 1},
    ][seed % 4]
    problem = _per_edge(seed, **kwargs)
    relayed, relays = per_edge_graph(problem)
    assert relayed.settings.messages == "per_source"
    source_of = {r: e.source for e in relayed.graph.edges for r in relays if e.target == r}
    ids, devices = [n.id for n in problem.graph.nodes], problem.device_ids
    for combo in itertools.product(devices, repeat=len(ids)):
        where = dict(zip(ids, combo))
        direct = verify_pipeline(problem, PipelineSolution(where))
        via = verify_pipeline(relayed, PipelineSolution({**where, **{r: where[u] for r, u in source_of.items()}}))
        assert direct.feasible == via.feasible
        if direct.feasible:
            assert via.objective == pytest.approx(direct.objective, rel=1e-12, abs=1e-12)
    optimum = brute_force_pipeline(problem)
    res = solve_pipeline(problem, SolveSettings(time_limit_s=30))
    if math.isinf(optimum):
        assert res.status == "infeasible"
    else:
        assert res.status == "optimal"
        assert res.objective == pytest.approx(optimum, rel=1e-9, abs=1e-9)
        assert set(res.assignment) == set(ids)  # no relay node in the answer


def test_a_bandwidth_that_cannot_price_a_message_is_bad_input(llama):
    """The joint problem writes each message as bytes at the bandwidth: an unbounded one is refused with the reason."""
    settings = LayerPlanSettings(devices=2, memory_bytes=MEMORY, bandwidth_bytes_per_s=math.inf)
    with pytest.raises(InputError, match="not a finite rate more than 0"):
        joint_from_imported(json.loads(llama.read_text()), str(llama), settings)


@pytest.mark.parametrize("batch", [0, "8", 1.5])
def test_a_malformed_batch_size_is_named(tmp_path, capsys, batch):
    """The pipeline reads an imported graph's ``layers.batch_size`` (its samples a micro-batch): a bad one is exit 2
    naming the file and the field, not a traceback."""
    data = json.loads((EXAMPLES / "tiny.json").read_text())
    path = tmp_path / "g.json"
    path.write_text(json.dumps({**data, "layers": {"batch_size": batch}}))
    capsys.readouterr()
    assert main(["solve", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "layers.batch_size" in err and str(path) in err and "Traceback" not in err
