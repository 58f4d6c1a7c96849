"""Pipeline partitioning: BERT-24 training (64 layer nodes) on 6 accelerators and a CPU core, proven optimal.

Run from the repository root: ``python examples/pipeline.py`` (about 2 s).  The CLI does the same with
``milp-partition solve examples/bert24_training.json``; docs/pipeline.md explains the problem.
"""

from pathlib import Path

from milp_partition import PipelineProblem, PipelineSolution, SolveSettings, read_instance, solve_pipeline, verify_pipeline

HERE = Path(__file__).resolve().parent

instance = read_instance(HERE / "bert24_training.json")  # a Tarnawski et al. file: graph and cluster
assert instance.cluster is not None
problem = PipelineProblem(instance.graph, instance.cluster, source=instance.source)
result = solve_pipeline(problem, SolveSettings(time_limit_s=60, threads=1))

# The result's objective is already the independent verifier's; re-check it here to show the verifier's API.
assert result.objective is not None
report = verify_pipeline(problem, PipelineSolution(result.assignment))
assert report.feasible and abs(report.time_per_sample - result.objective) <= 1e-9 * result.objective
print(f"status {result.status}")
print(f"time per sample {result.objective:.10g} {result.time_unit} (bound {result.bound:.10g}; reference optimum 41.7458125)")
for device, load in result.loads.items():
    print(f"  {device:5} load {load:.6g}")
