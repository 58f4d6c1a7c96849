"""Calibration: a device profile turns FLOPs and bytes into times, then the pipeline problem is solved with them.

``examples/tiny_flops.json`` is a 10-node CNN whose compute nodes carry FLOPs and bytes but no measured time; the H100
datasheet profile (or one measured by ``milp-partition calibrate``) fills them in.  Run from the repository root:
``python examples/calibrate.py`` (a few seconds).  See docs/calibration.md.
"""

from pathlib import Path

from milp_partition import PipelineProblem, SolveSettings, apply_profile, read_instance, resolve_profile, solve_pipeline

HERE = Path(__file__).resolve().parent

instance = read_instance(HERE / "tiny_flops.json")
assert instance.cluster is not None
profile = resolve_profile("H100")  # a datasheet name (V100, A100, H100, H200) or the path of a measured profile
graph, applied = apply_profile(instance.graph, profile, source=instance.source)
print(f"profile {profile.name}: {len(applied.filled)} node times from FLOPs and bytes, {len(applied.kept)} measured kept")
result = solve_pipeline(PipelineProblem(graph, instance.cluster), SolveSettings(time_limit_s=60, threads=1))
print(f"status {result.status}")
print(f"time per sample {result.objective:.6g} {result.time_unit} (bound {result.bound:.6g})")
