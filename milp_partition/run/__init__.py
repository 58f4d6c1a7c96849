"""Run a joint plan on PyTorch's own distributed stack and measure it against the prediction.

``milp-partition run PLAN.json`` (:mod:`milp_partition.cli.run`): one process per device, the model
rebuilt from its import reference, split into the plan's stages with ``torch.distributed.pipelining``
(1F1B, the plan's micro-batches), data parallelism by DDP, tensor parallelism by DTensor's
``parallelize_module`` (the planner's column/row roles), recomputation by ``torch.utils.checkpoint``
(through ``checkpoint_wrapper``); then the same steps in one process on the same data, and the losses,
step times and memory compared with the plan's. With data and tensor parallelism together the gradients are
all-reduced over the data-parallel ranks by :func:`.mixed.allreduce_gradients` (DDP takes no DTensor parameters);
a plan whose stages have different degrees runs on :mod:`.mixed`'s own 1F1B schedule (:mod:`.layout`).

A top layer (beside :mod:`milp_partition.cli`): nothing below imports it, and torch is imported
only inside the functions that run (:mod:`milp_partition.run.engine`), so this package imports
without torch.
"""
