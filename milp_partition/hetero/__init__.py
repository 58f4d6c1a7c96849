"""Sailor's heterogeneous-cluster problem (issue 40): mixed GPU kinds, planned exactly under Sailor's simulator.

See ``docs/hetero.md``: :mod:`.problem` (data and plan), :mod:`.cost` (the iteration time), :mod:`.search` (the
branch and bound), :mod:`.solve` (the chain steps).
"""
