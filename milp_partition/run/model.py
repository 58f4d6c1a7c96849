"""The model side of a run, shared by the workers, the single-process reference and the prediction's layer timer.

The model from its import reference, the synthetic batch, the loss and the optimizer. Torch is imported
inside the functions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from milp_partition.importers.torch_import import build_module, make_inputs, parse_input_shape
from milp_partition.run.spec import RunSpec


def build_model(spec: RunSpec, seed: int) -> Any:
    """The model from its import reference, initialised from ``seed``, in the import's dtype."""
    import torch

    torch.manual_seed(seed)
    model = build_module(spec.model)
    dtype = getattr(torch, spec.dtype, torch.float32)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        model = model.to(dtype)
    return model.train()


def batch(spec: RunSpec, model: Any, step: int, seed: int) -> tuple[list[Any], dict[str, Any], Any]:
    """Step ``step``'s synthetic batch of ``N b`` samples (the global batch): inputs (from the import's specs) and class targets."""
    import torch

    specs = [parse_input_shape(s) for s in spec.inputs]
    specs = [replace(s, shape=(spec.global_batch, *s.shape[1:])) for s in specs]
    args, kwargs = make_inputs(specs, spec.dtype, seed=seed * 100_003 + step, model=model)
    with torch.no_grad():  # the output's shape per sample, from the first sample
        out = model(*[a[:1] for a in args], **{k: v[:1] for k, v in kwargs.items()})
    gen = torch.Generator().manual_seed(seed * 100_003 + step + 7)
    target = torch.randint(0, out.shape[-1], (spec.global_batch, *out.shape[1:-1]), generator=gen)
    return args, kwargs, target


def batch_on(device: Any, args: list[Any], kwargs: dict[str, Any], target: Any) -> tuple[list[Any], dict[str, Any], Any]:
    """A batch of :func:`batch` (inputs, keyword inputs, targets) moved to ``device``."""
    return [a.to(device) for a in args], {k: v.to(device) for k, v in kwargs.items()}, target.to(device)


def loss_fn(out: Any, target: Any) -> Any:
    """Mean cross-entropy over every position (the last dimension holds the classes or the vocabulary)."""
    from torch.nn import functional as F

    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def optimizer(spec: RunSpec, params: Any) -> Any:
    """Adam when the import counted two moments of optimizer state (factor >= 3: gradients + 2), else SGD."""
    import torch

    params = list(params)
    if spec.optimizer_state_factor >= 3:
        return torch.optim.Adam(params, lr=1e-3, foreach=False)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9 if spec.optimizer_state_factor >= 2 else 0.0, foreach=False)
