"""Figures of solved plans (matplotlib, the optional ``plot`` extra), one module per problem.

Each module has ``figure(result, instance_path, options) -> matplotlib Figure``;
:data:`PLOT_MODULES` maps a result's ``problem`` to its module (a new problem adds one
module and one entry).  Bars carry a ``gid`` (``task:ID``, ``transfer:S->T``,
``load:DEV``, ``memory:DEV``, ``layer:ID``, ``time:STAGE``) so tests can count and read them.
"""

from __future__ import annotations

from collections.abc import Mapping

PLOT_MODULES: Mapping[str, str] = {
    "placement": "milp_partition.plots.placement",
    "pipeline": "milp_partition.plots.pipeline",
    "strategy": "milp_partition.plots.strategy",
    "joint": "milp_partition.plots.joint",
    "galvatron": "milp_partition.plots.galvatron",
}


def pyplot():  # type: ignore[no-untyped-def]
    """matplotlib's pyplot on the non-interactive Agg back-end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
