"""The registry of placement heuristics: name -> function of a :class:`PlacementProblem`.

=========  =================================================================  =====================================
name       method                                                             module
=========  =================================================================  =====================================
heft       HEFT (Topcuoglu et al., IEEE TPDS 2002), bounded insertion         :mod:`milp_partition.heuristics.list_scheduling`
heft-iter  HEFT over several rank functions (Zhao, Sakellariou 2003), best    :mod:`milp_partition.heuristics.list_scheduling`
m-topo     Baechi's m-TOPO (Jeon et al., SoCC 2020)                           :mod:`milp_partition.heuristics.list_scheduling`
m-etf      Baechi's m-ETF (Jeon et al., SoCC 2020)                            :mod:`milp_partition.heuristics.list_scheduling`
pardnn     ParDNN-style critical-path clustering (Qararyah et al. 2021)       :mod:`milp_partition.heuristics.clustering`
=========  =================================================================  =====================================

Each returns a schedule that is feasible under the problem's settings (static
memory always, liveness memory because the static sum bounds it, link contention
when asked) or raises :class:`~milp_partition.heuristics.placement_state.PlacementHeuristicError`.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping

from milp_partition.heuristics.clustering import pardnn
from milp_partition.heuristics.list_scheduling import heft, heft_iterated, m_etf, m_topo
from milp_partition.heuristics.placement_state import PlacementHeuristicError

from milp_partition.errors import InputError
from milp_partition.placement.problem import PlacementProblem, PlacementSolution

PLACEMENT_HEURISTICS: Mapping[str, Callable[[PlacementProblem], PlacementSolution]] = types.MappingProxyType(
    {"heft": heft, "m-topo": m_topo, "m-etf": m_etf, "pardnn": pardnn, "heft-iter": heft_iterated}
)

__all__ = ["PLACEMENT_HEURISTICS", "PlacementHeuristicError", "run_placement_heuristic"]


def run_placement_heuristic(name: str, problem: PlacementProblem) -> PlacementSolution:
    """Run the heuristic called ``name`` on ``problem``.

    Raises
    ------
    InputError
        For an unknown name (the message lists the known ones).
    PlacementHeuristicError
        When memory (or the allowed devices) leave a task nowhere to go.
    """
    try:
        fn = PLACEMENT_HEURISTICS[name]
    except KeyError:
        raise InputError(
            f"unknown placement heuristic {name!r}; known: {', '.join(PLACEMENT_HEURISTICS)}", where="heuristic"
        ) from None
    return fn(problem)
