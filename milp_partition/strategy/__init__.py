"""The layer-wise parallelization (strategy) problem: data model, layer tables, memory models, reductions and solve steps."""
