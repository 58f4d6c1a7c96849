"""Brute force over every assignment, scored by the independent verifier: the test oracle."""

from __future__ import annotations

import itertools
import math

from milp_partition.pipeline.problem import PipelineProblem, PipelineSolution
from milp_partition.verifiers.pipeline import verify_pipeline


def brute_force_pipeline(problem: PipelineProblem) -> float:
    """The optimum over all device assignments (``inf`` when none is feasible)."""
    ids = [n.id for n in problem.graph.nodes]
    devices = problem.device_ids
    best = math.inf
    for combo in itertools.product(devices, repeat=len(ids)):
        report = verify_pipeline(problem, PipelineSolution(dict(zip(ids, combo))))
        if report.feasible and report.objective < best:
            best = report.objective
    return best
