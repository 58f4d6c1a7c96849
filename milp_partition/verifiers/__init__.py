"""Independent verifiers, one module per problem.

Nothing here imports :mod:`milp_partition.formulations`, :mod:`milp_partition.heuristics`
or a solve chain (``tests/test_layering.py`` enforces it): a verifier recomputes
every figure from the problem's definition, so a bug elsewhere cannot hide by
agreeing with itself.
"""
