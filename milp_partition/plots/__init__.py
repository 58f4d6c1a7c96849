"""Figures of solved plans (matplotlib, the optional ``plot`` extra), one module per problem.

Each module has ``figure(result, instance_path, options) -> matplotlib Figure``;
the problem's descriptor in :data:`milp_partition.registry.PROBLEMS` names it (``plot``).  Bars carry a ``gid`` (``task:ID``, ``transfer:S->T``,
``load:DEV``, ``memory:DEV``, ``layer:ID``, ``time:STAGE``) so tests can count and read them.
"""

from __future__ import annotations


def pyplot():  # type: ignore[no-untyped-def]
    """matplotlib's pyplot on the non-interactive Agg back-end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
