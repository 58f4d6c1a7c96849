"""Joint planning (Piper's problem), built in Python: stages x data x tensor parallelism x recomputation.

Eight identical transformer-like layers, each offered on t = 1 or 2 devices, with or without activation
recomputation, planned on 8 devices with 3 GB each; the exact DP proves the optimum.  Run from the repository
root: ``python examples/joint.py`` (a few seconds).  Files in Piper's format or ``milp-partition-joint/1`` are read
with ``read_joint``; see docs/joint.md.
"""

from milp_partition import (
    JointConfig,
    JointEdge,
    JointNode,
    JointPlan,
    JointProblem,
    JointSolveSettings,
    JointStage,
    joint_cluster,
    solve_joint,
    verify_joint,
)

GB = 1e9
LAYERS = 8


def layer(i: int) -> JointNode:
    """One layer: time per sample p (s), parameter bytes w, activation bytes a per micro-batch, fixed bytes b."""
    configs = {}
    for t in (1, 2):
        p, w, a, b = 0.010 / t * 1.05 ** (t - 1), 0.4 * GB / t, 0.5 * GB / t, 1.6 * GB / t
        configs[t] = (
            JointConfig("vanilla", time_per_sample_s=p, parameter_bytes=w, activation_bytes=a, fixed_bytes=b),
            # recomputation keeps only the layer's input and runs the forward pass again (a third more time)
            JointConfig(
                "activation recomp", time_per_sample_s=p * 4 / 3, parameter_bytes=w, activation_bytes=a / 8, fixed_bytes=b
            ),
        )
    return JointNode(id=str(i), name=f"layer{i}", configs=configs)


problem = JointProblem(
    nodes=tuple(layer(i) for i in range(LAYERS)),
    edges=tuple(JointEdge(str(i), str(i + 1), bytes=8e6) for i in range(LAYERS - 1)),
    cluster=joint_cluster(devices=8, memory_bytes=3 * GB, bandwidth_bytes_per_s=25 * GB),
    microbatches=16,
    name="eight-layers",
)
result = solve_joint(problem, JointSolveSettings(time_limit_s=60))

# The plan is in result.stages (pipeline order); re-check it with the independent verifier.
plan = JointPlan(
    tuple(JointStage(tuple(s["nodes"]), s["data_parallel"], s["tensor_parallel"], s["configs"]) for s in result.stages)
)
report = verify_joint(problem, plan)
assert report.feasible and result.objective is not None and abs(report.objective - result.objective) <= 1e-12
print(f"status {result.status}")
print(f"time per sample {result.objective:.6g} s (bound {result.bound:.6g})")
for k, s in enumerate(result.stages, 1):
    recomputed = sum(c == "activation recomp" for c in s["configs"].values())
    print(
        f"  stage {k}: layers {','.join(s['nodes'])}  d={s['data_parallel']} t={s['tensor_parallel']}  "
        f"{s['memory_bytes'] / GB:.2f} GB per device, {recomputed} recomputed"
    )
