"""Heuristics that warm-start the exact models and give them upper bounds."""

from milp_partition.heuristics.pipeline_dp import DPResult, IdealDPSettings, chain_dp, ideal_dp

__all__ = ["DPResult", "IdealDPSettings", "chain_dp", "ideal_dp"]
