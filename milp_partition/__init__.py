"""milp_partition: provably optimal (or provably near-optimal) partitioning of DNN training across GPUs."""

__version__ = "0.1.0"
