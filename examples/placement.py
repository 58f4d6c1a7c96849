"""Operator placement and scheduling: Moirai's toy (14 tasks, 3 devices, memory binds), makespan proven optimal.

Run from the repository root: ``python examples/placement.py`` (about 1 s).  The CLI does the same with
``milp-partition solve examples/moirai_example1.json``; see docs/placement.md.
"""

from pathlib import Path

from milp_partition import PlacementSolveSettings, read_placement_instance, solve_placement, verify_placement
from milp_partition.placement.solve import solution_of

HERE = Path(__file__).resolve().parent

problem = read_placement_instance(HERE / "moirai_example1.json")  # placement-instance/1 (Moirai's sample data)
result = solve_placement(problem, PlacementSolveSettings(time_limit_s=60, threads=1))

# Re-simulate the schedule with the independent verifier (its makespan is the result's objective).
report = verify_placement(problem, solution_of(problem, result))
assert report.feasible, report.violations
print(f"status {result.status}")
print(f"makespan {result.objective:.6g} {result.time_unit} (bound {result.bound:.6g}; simulated {report.makespan:.6g})")
for task in problem.task_ids:
    print(f"  {task:6} on {result.assignment[task]} at {result.starts[task]:.6g}")
