"""Integer programs, one module each: ``build`` a model, ``hint`` a warm start, ``decode`` values.

A formulation never calls a solver and never judges its own answer.
"""
