"""Galvatron's problem (PKU-DAIR/Hetu-Galvatron): per-layer hybrid parallelism on its own profiles, solved exactly.

See ``docs/galvatron.md``: :mod:`.problem` (data model), :mod:`.costs` (its cost model), :mod:`.dp` (the exact
search), :mod:`.solve` (the chain steps).
"""
