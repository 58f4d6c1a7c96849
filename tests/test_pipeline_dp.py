"""The pipeline DPs against a brute force written here and against the Tarnawski reference optima."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from milp_partition.heuristics.pipeline_dp import DPResult, IdealDPSettings, chain_dp, ideal_dp

from milp_partition.cluster import Device, homogeneous_cluster, make_cluster
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PIPELINE = SHARED / "benchmarks" / "pipeline"

#: Reference optima of the contiguous variant (shared/benchmarks/README.md, section pipeline/).
LAYER_GRAPH_OPTIMA = {
    "LayerGraphs/bert24_inference.json": 17.78990625,
    "LayerGraphs/bert24_training.json": 41.7458125,
    "LayerGraphs/gnmt_inference.json": 32.910658203125,
    "LayerGraphs/resnet50_inference.json": 33.774666015625,
}


# --------------------------------------------------------------------------- an independent scorer


class Scorer:
    """Objective of an assignment by the problem's definition, ``inf`` when it breaks a rule.

    Written from the definition alone (no :mod:`milp_partition.pipeline.costs`); the memory of a
    node under 1F1B is rounded up to whole bytes, as the model and the verifier do.
    """

    def __init__(self, problem: PipelineProblem, *, contiguous: bool | None = None) -> None:
        graph, cluster, settings = problem.graph, problem.cluster, problem.settings
        self.problem = problem
        self.contiguous = settings.contiguous if contiguous is None else contiguous
        self.devices = problem.device_ids
        self.kind = dict(zip(self.devices, problem.device_kinds, strict=True))
        self.capacity = dict(zip(self.devices, problem.device_memory_bytes, strict=True))
        self.position = {d.id: i for i, d in enumerate(cluster.devices)}
        self.nodes = {nd.id: nd for nd in graph.nodes}
        self.succ: dict[str, list[str]] = {v: [] for v in self.nodes}
        self.out_time = dict.fromkeys(self.nodes, 0.0)
        for e in graph.edges:
            self.succ[e.source].append(e.target)
            self.out_time[e.source] = max(self.out_time[e.source], float(e.transfer_time or 0.0))
        forward = {v for v, nd in self.nodes.items() if not nd.is_backward}
        self.forward = forward
        self.reach: dict[str, set[str]] = {}
        for v in reversed([graph.nodes[i].id for i in graph.arrays.topo_order.tolist()]):
            self.reach[v] = {v}
            if v in forward:
                for w in self.succ[v]:
                    if w in forward:
                        self.reach[v] |= self.reach[w]
        self.stages = len(cluster.devices)

    def memory_of(self, v: str, device: str) -> float:
        nd, s = self.nodes[v], self.problem.settings
        if s.memory_model == "1f1b":
            in_flight = self.stages - self.position[device]
            amount = s.optimizer_state_factor * nd.param_bytes + in_flight * nd.activation_bytes
            return math.ceil(amount + nd.other_bytes)
        return nd.param_bytes + nd.activation_bytes + nd.other_bytes

    def __call__(self, where: dict[str, str]) -> float:
        for v, nd in self.nodes.items():
            if not nd.can_run_on(self.kind[where[v]]):
                return math.inf
        groups: dict[str, str] = {}
        for v, nd in self.nodes.items():
            if nd.colocation_group is not None and groups.setdefault(nd.colocation_group, where[v]) != where[v]:
                return math.inf
        if self.contiguous and not self._convex(where):
            return math.inf
        settings = self.problem.settings
        if settings.memory_model == "1f1b":  # activations to later stages, gradients to earlier ones
            for u in self.nodes:
                for v in self.succ[u]:
                    a, b = where[u], where[v]
                    if a not in self.position or b not in self.position:
                        continue
                    if u in self.forward and v in self.forward and self.position[a] > self.position[b]:
                        return math.inf
                    if u not in self.forward and v not in self.forward and self.position[a] < self.position[b]:
                        return math.inf
        memory = dict.fromkeys(self.position, 0.0)
        loads = dict.fromkeys(self.devices, 0.0)
        for v, nd in self.nodes.items():
            d = where[v]
            loads[d] += nd.time_on(self.kind[d])
            if d in self.position:
                memory[d] += self.memory_of(v, d)
        for d, used in memory.items():
            cap = self.capacity[d]
            if cap is not None and used > cap:
                return math.inf
        for u in self.nodes:
            receivers = {where[v] for v in self.succ[u]} - {where[u]}
            if receivers and where[u] in self.position:
                loads[where[u]] += self.out_time[u]
            for d in receivers:
                if d in self.position:
                    loads[d] += self.out_time[u]
        if settings.objective == "memory":
            limit = float(settings.max_time_per_sample or 0.0)
            if any(load > limit * (1 + 1e-9) + 1e-12 for load in loads.values()):
                return math.inf
            return max(memory.values(), default=0.0)
        return max(loads.values(), default=0.0)

    def chain_of_ideals(self, where: dict[str, str]) -> bool:
        """Whether the devices can be ordered so that every forward edge runs forward (the ideal DP's family)."""
        after: dict[str, set[str]] = {d: set() for d in self.devices}
        for u in self.forward:
            for v in self.succ[u]:
                if v in self.forward and where[u] != where[v]:
                    after[where[u]].add(where[v])
        done: set[str] = set()
        while len(done) < len(self.devices):
            left = [d for d in self.devices if d not in done]
            ready = [d for d in left if not any(d in after[e] for e in left)]
            if not ready:
                return False
            done.update(ready)
        return True

    def _convex(self, where: dict[str, str]) -> bool:
        for d in self.devices:
            on = [v for v in self.forward if where[v] == d]
            for w in self.forward:
                if where[w] == d:
                    continue
                if any(w in self.reach[u] for u in on) and any(v in self.reach[w] for v in on):
                    return False
        return True


def brute_force(problem: PipelineProblem) -> float:
    """Best objective over every assignment of colocation classes to devices."""
    return brute_force_both(problem)[0]


def brute_force_both(problem: PipelineProblem) -> tuple[float, float]:
    """The optimum, and the optimum over splits whose devices form a chain of ideals (the ideal DP's family)."""
    scorer = Scorer(problem)
    classes: dict[str, list[str]] = {}
    for nd in problem.graph.nodes:
        classes.setdefault(nd.colocation_group or f"#{nd.id}", []).append(nd.id)
    members = list(classes.values())
    best = best_chain = math.inf
    for combo in itertools.product(problem.device_ids, repeat=len(members)):
        where = {v: d for group, d in zip(members, combo, strict=True) for v in group}
        value = scorer(where)
        best = min(best, value)
        if value < best_chain and scorer.chain_of_ideals(where):
            best_chain = value
    return best, best_chain


# --------------------------------------------------------------------------- random instances


@dataclass(frozen=True)
class Shape:
    """What a random instance may contain."""

    path: bool = False
    backward: bool = False
    classes: bool = False
    binding_memory: bool = False
    cpu_cores: int = 0
    cpu_only: bool = False
    memory_model: str = "static"
    objective: str = "time"
    contiguous: bool = True


def random_problem(seed: int, shape: Shape, max_nodes: int = 7) -> PipelineProblem:
    rng = random.Random(seed)
    n = rng.randint(3, max_nodes)
    num_devices = rng.choice([2, 3])
    k = max(1, num_devices - shape.cpu_cores)
    backward = [shape.backward and i >= n // 2 and rng.random() < 0.6 for i in range(n)]
    group: dict[int, str] = {}
    if shape.classes:
        for i in range(n):
            twin = rng.randrange(i) if i else -1
            if twin >= 0 and twin not in group and not backward[twin] and rng.random() < (0.5 if backward[i] else 0.15):
                group[i] = group[twin] = f"g{twin}"
    nodes = []
    for i in range(n):
        free = rng.random() < 0.2  # no time anywhere (a candidate for merging into a neighbour)
        weightless = free and rng.random() < 0.5
        t = 0.0 if free else round(rng.uniform(0.1, 5.0), 3)
        nodes.append(
            Node(
                id=f"n{i}",
                forward_time=0.0 if backward[i] else t,
                backward_time=t if backward[i] else 0.0,
                time_by_kind={"cpu": 0.0 if free else round(rng.uniform(1.0, 10.0), 3)} if shape.cpu_cores else {},
                param_bytes=0 if weightless else rng.randint(0, 40),
                activation_bytes=0 if weightless else rng.randint(0, 40),
                other_bytes=0 if weightless else rng.randint(0, 20),
                colocation_group=group.get(i),
                allowed_kinds=("cpu",) if shape.cpu_only and shape.cpu_cores and rng.random() < 0.25 else None,
                is_backward=backward[i],
            )
        )
    pairs = (
        [(i, i + 1) for i in range(n - 1)]
        if shape.path
        else [(i, j) for j in range(1, n) for i in range(j) if rng.random() < (0.5 if j - i == 1 else 0.25)]
    )
    out_cost = {i: round(rng.uniform(0.0, 1.5), 3) for i in range(n)}
    graph = make_graph(nodes, [Edge(f"n{i}", f"n{j}", bytes=1, transfer_time=out_cost[i]) for i, j in pairs])
    factor = 2.0 if shape.memory_model == "1f1b" else 1.0
    in_flight = k if shape.memory_model == "1f1b" else 1
    total = sum(factor * nd.param_bytes + in_flight * nd.activation_bytes + nd.other_bytes for nd in nodes)
    memory = max(1, int(total / k * rng.uniform(1.05, 1.5))) if shape.binding_memory else None
    cluster = make_cluster([Device(f"gpu{d}", "gpu", memory) for d in range(k)], host_cpu_cores=shape.cpu_cores)
    work = sum(nd.total_time for nd in nodes)
    limit = round(rng.uniform(0.35, 0.9) * work, 3) if shape.objective == "memory" else None
    settings = PipelineSettings(
        contiguous=shape.contiguous,
        objective=shape.objective,  # type: ignore[arg-type]
        max_time_per_sample=limit,
        memory_model=shape.memory_model,  # type: ignore[arg-type]
        optimizer_state_factor=factor,
    )
    return PipelineProblem(graph, cluster, settings)


SHAPES = [
    Shape(),
    Shape(binding_memory=True),
    Shape(contiguous=False),
    Shape(classes=True, backward=True),
    Shape(classes=True, backward=True, binding_memory=True),
    Shape(classes=True),
    Shape(cpu_cores=1, cpu_only=True),
    Shape(cpu_cores=1, classes=True, backward=True, binding_memory=True),
    Shape(memory_model="1f1b", binding_memory=True),
    Shape(memory_model="1f1b", backward=True, classes=True),
    Shape(memory_model="1f1b", cpu_cores=1, backward=True, classes=True),
    Shape(objective="memory"),
    Shape(objective="memory", cpu_cores=1, binding_memory=True, classes=True, backward=True),
]


def check_result(problem: PipelineProblem, result: DPResult, optimum: float) -> None:
    """A DP's split is contiguous and feasible, its value is its true objective, and never below the optimum."""
    if result.solution is None:
        assert result.value == math.inf, result.message
        return
    assert set(result.solution.assignment) == {nd.id for nd in problem.graph.nodes}
    true_value = Scorer(problem, contiguous=True)(dict(result.solution.assignment))
    assert math.isfinite(true_value), f"infeasible or non-contiguous split: {result.message}"
    assert result.value == pytest.approx(true_value, rel=1e-9, abs=1e-9), result.message
    assert result.value >= optimum - 1e-9 * max(1.0, abs(optimum)), result.message


@pytest.mark.parametrize("seed", range(156))
def test_random_dags_against_brute_force(seed: int) -> None:
    shape = SHAPES[seed % len(SHAPES)]
    problem = random_problem(seed, shape)
    optimum, family_optimum = brute_force_both(problem)
    ideal, chain = ideal_dp(problem), chain_dp(problem)
    for result in (ideal, chain):
        check_result(problem, result, optimum)
        assert result.seconds >= 0 and result.states >= 1
    if not math.isfinite(optimum):
        assert ideal.solution is None and chain.solution is None
    loose = any(nd.is_backward and nd.colocation_group is None for nd in problem.graph.nodes)
    restricted = shape.memory_model == "1f1b" and shape.cpu_cores > 0 and len(problem.cluster.devices) > 1
    if not loose and not restricted:  # optimal among the splits that are chains of ideals (none of them: inf)
        assert ideal.exact, ideal.message
        if math.isfinite(family_optimum):
            assert ideal.value == pytest.approx(family_optimum, rel=1e-9, abs=1e-9), ideal.message
        else:
            assert ideal.solution is None, ideal.message
    elif ideal.solution is not None:
        assert not ideal.exact, ideal.message
    if not loose:  # the prefixes of a topological order are ideals: the ideal DP never does worse
        assert ideal.value <= chain.value + 1e-9 * max(1.0, abs(chain.value))


@pytest.mark.parametrize("seed", range(24))
def test_ideal_dp_is_exact_on_paths(seed: int) -> None:
    shape = [
        Shape(path=True),
        Shape(path=True, binding_memory=True),
        Shape(path=True, cpu_cores=1, cpu_only=True, binding_memory=True),
        Shape(path=True, memory_model="1f1b", binding_memory=True),
        Shape(path=True, objective="memory"),
        Shape(path=True, objective="memory", cpu_cores=1, binding_memory=True),
    ][seed % 6]
    problem = random_problem(100 + seed, shape)
    optimum = brute_force(problem)
    for result in (ideal_dp(problem), chain_dp(problem)):  # on a path both families hold every contiguous split
        assert result.exact, result.message
        check_result(problem, result, optimum)
        if math.isfinite(optimum):
            assert result.value == pytest.approx(optimum, rel=1e-9, abs=1e-9), result.message
        else:
            assert result.solution is None


def test_devices_may_stay_empty() -> None:
    nodes = [Node("a", forward_time=1.0), Node("b", forward_time=1.0), Node("c", forward_time=1.0)]
    edges = [Edge("a", "b", transfer_time=50.0), Edge("b", "c", transfer_time=50.0)]
    problem = PipelineProblem(make_graph(nodes, edges), homogeneous_cluster(3, None, host_cpu_cores=1))
    for result in (ideal_dp(problem), chain_dp(problem)):
        assert result.value == pytest.approx(3.0), result.message
        assert result.solution is not None and len(set(result.solution.assignment.values())) == 1


def test_a_1f1b_pipeline_may_skip_a_middle_accelerator() -> None:
    nodes = [Node("a", forward_time=1.0, other_bytes=10), Node("b", forward_time=1.0, other_bytes=10)]
    graph = make_graph(nodes, [Edge("a", "b", transfer_time=0.5)])
    cluster = make_cluster([Device(f"gpu{i}", memory_bytes=m) for i, m in enumerate((10, 0, 10))])
    problem = PipelineProblem(graph, cluster, PipelineSettings(memory_model="1f1b"))
    for result in (ideal_dp(problem), chain_dp(problem)):
        assert result.solution is not None, result.message
        assert dict(result.solution.assignment) == {"a": "gpu0", "b": "gpu2"}
        assert result.value == pytest.approx(1.5)


def test_1f1b_runs_backward_edges_to_earlier_stages() -> None:
    """Under 1F1B the gradient edges b2 -> b1 -> b0 (colocated with f2, f1, f0) run back through the stages that the
    activations f0 -> f1 -> f2 ran forward through: one stage per pair, the middle one paying four transfers."""
    nodes = [Node(f"f{i}", forward_time=2.0, colocation_group=f"g{i}") for i in range(3)]
    nodes += [Node(f"b{i}", backward_time=3.0, is_backward=True, colocation_group=f"g{i}") for i in range(3)]
    pairs = [("f0", "f1"), ("f1", "f2"), ("f2", "b2"), ("b2", "b1"), ("b1", "b0")]
    graph = make_graph(nodes, [Edge(u, v, transfer_time=0.1) for u, v in pairs])
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings(memory_model="1f1b"))
    for result in (ideal_dp(problem), chain_dp(problem)):
        assert result.solution is not None and result.exact, result.message
        assert dict(result.solution.assignment) == {f"{k}{i}": f"gpu{i}" for k in "fb" for i in range(3)}
        assert result.value == pytest.approx(5.4) == brute_force(problem)
    swapped = {f"{k}{i}": f"gpu{2 - i}" for k in "fb" for i in range(3)}  # stages in the reverse order
    assert Scorer(problem)(swapped) == math.inf


def _wide_graph(width: int) -> PipelineProblem:
    nodes = [Node("src", forward_time=1.0)] + [Node(f"b{i}", forward_time=1.0 + i) for i in range(width)]
    nodes.append(Node("sink", forward_time=1.0))
    edges = [Edge("src", f"b{i}", transfer_time=0.5) for i in range(width)]
    edges += [Edge(f"b{i}", "sink", transfer_time=0.25) for i in range(width)]
    return PipelineProblem(make_graph(nodes, edges), homogeneous_cluster(3, None))


def test_ideal_dp_gives_up_beyond_max_ideals_and_chain_dp_still_runs() -> None:
    problem = _wide_graph(12)  # 2 + 2**12 ideals
    result = ideal_dp(problem, IdealDPSettings(max_ideals=1000))
    assert result.solution is None and result.value == math.inf and not result.exact
    assert "more than 1000 ideals" in result.message and "chain DP" in result.message
    chain = chain_dp(problem)
    assert chain.solution is not None and chain.states == 15
    full = ideal_dp(problem, IdealDPSettings(max_ideals=5000))
    assert full.exact and full.states == 2 + 2**12 and full.value <= chain.value


def test_no_split_fits_in_memory() -> None:
    nodes = [Node(f"n{i}", forward_time=1.0, param_bytes=60) for i in range(4)]
    edges = [Edge(f"n{i}", f"n{i + 1}", transfer_time=0.1) for i in range(3)]
    problem = PipelineProblem(make_graph(nodes, edges), homogeneous_cluster(2, 100))
    for result in (ideal_dp(problem), chain_dp(problem)):
        assert result.solution is None and result.value == math.inf
        assert "no split fits in memory" in result.message


def test_cpu_only_nodes_go_to_cpu_cores() -> None:
    nodes = [
        Node("ids", allowed_kinds=("cpu",)),  # free, so a candidate for merging, but not where "embed" may run
        Node("embed", forward_time=1.0, time_by_kind={"cpu": 2.0}, allowed_kinds=("cpu",)),
        Node("a", forward_time=4.0, time_by_kind={"cpu": 40.0}),
        Node("b", forward_time=4.0, time_by_kind={"cpu": 40.0}),
        Node("post", forward_time=1.0, time_by_kind={"cpu": 1.0}, allowed_kinds=("cpu",)),
    ]
    edges = [Edge(u, v, transfer_time=0.5) for u, v in (("embed", "a"), ("a", "b"), ("b", "post"))]
    edges.append(Edge("ids", "a", transfer_time=0.25))
    problem = PipelineProblem(make_graph(nodes, edges), homogeneous_cluster(2, None, host_cpu_cores=2))
    for result in (ideal_dp(problem), chain_dp(problem)):
        assert result.solution is not None, result.message
        where = result.solution.assignment
        assert where["embed"].startswith("cpu") and where["post"].startswith("cpu")
        assert where["embed"] != where["post"]  # a CPU core holds one contiguous stage
        assert result.value == pytest.approx(Scorer(problem)(dict(where)))
        assert result.value == pytest.approx(brute_force(problem))


def test_1f1b_with_cpu_cores_is_not_claimed_exact() -> None:
    nodes = [Node(f"n{i}", forward_time=1.0 + i, time_by_kind={"cpu": 3.0}) for i in range(4)]
    edges = [Edge(f"n{i}", f"n{i + 1}", transfer_time=0.2) for i in range(3)]
    settings = PipelineSettings(memory_model="1f1b")
    problem = PipelineProblem(make_graph(nodes, edges), homogeneous_cluster(2, None, host_cpu_cores=1), settings)
    result = ideal_dp(problem)
    assert not result.exact and "position order" in result.message
    check_result(problem, result, brute_force(problem))


# --------------------------------------------------------------------------- the Tarnawski layer graphs


def read_tarnawski(path: Path) -> PipelineProblem:
    """The Tarnawski JSON, mapped as in the project's reader (kept here so this test stands alone)."""
    data = json.loads(path.read_text())
    nodes = []
    for nd in data["nodes"]:
        backward = bool(nd["isBackwardNode"])
        nodes.append(
            Node(
                id=str(nd["id"]),
                name=nd.get("name", ""),
                forward_time=0.0 if backward else nd["fpgaLatency"],
                backward_time=nd["fpgaLatency"] if backward else 0.0,
                is_backward=backward,
                time_by_kind={"cpu": nd["cpuLatency"]},
                other_bytes=int(nd["size"]),
                colocation_group=str(nd["colorClass"]) if "colorClass" in nd else None,
                allowed_kinds=None if nd["supportedOnFpga"] else ("cpu",),
            )
        )
    edges = [Edge(str(e["sourceId"]), str(e["destId"]), bytes=int(e["size"]), transfer_time=e["cost"]) for e in data["edges"]]
    cluster = homogeneous_cluster(data["maxFPGAs"], int(data["maxSizePerFPGA"]), kind="gpu", host_cpu_cores=data["maxCPUs"])
    return PipelineProblem(make_graph(nodes, edges, name=path.stem), cluster, PipelineSettings(), source=str(path))


@pytest.mark.parametrize("name", sorted(LAYER_GRAPH_OPTIMA))
def test_layer_graphs_reach_reference_optima(name: str) -> None:
    path = PIPELINE / name
    if not path.is_file():
        pytest.fail(f"benchmark file {path} is missing: the tests need ../shared beside the repo")
    problem = read_tarnawski(path)
    optimum = LAYER_GRAPH_OPTIMA[name]
    ideal = ideal_dp(problem)
    assert ideal.solution is not None, ideal.message
    assert ideal.exact, ideal.message
    assert ideal.value == pytest.approx(optimum, rel=1e-6), ideal.message
    chain = chain_dp(problem)
    assert chain.solution is not None, chain.message
    assert chain.value >= optimum * (1 - 1e-9), chain.message
    scorer = Scorer(problem)
    for result in (ideal, chain):
        assert result.solution is not None
        assert result.value == pytest.approx(scorer(dict(result.solution.assignment)), rel=1e-9)


def test_solutions_name_devices_of_the_problem() -> None:
    problem = random_problem(3, Shape(cpu_cores=1))
    result = ideal_dp(problem)
    assert result.solution is not None
    assert set(result.solution.assignment.values()) <= set(problem.device_ids)
    assert isinstance(result.solution, PipelineSolution)
