"""Models for the cost model's probes that are neither tuning models nor held back (issue 42: diagnose on a model of
one's own, never on the held-back ones).  Import one with ``milp-partition import torch benchmarks/probe_models.py:NAME``."""

from __future__ import annotations

from torch import nn


def mlp_silu_probe() -> nn.Module:
    """An MLP unlike the tuning and held-back ones: 5 blocks of width 112 with SiLU on 40 inputs, 12 classes."""
    mods: list[nn.Module] = []
    width = 40
    for _ in range(5):
        mods.append(nn.Sequential(nn.Linear(width, 112), nn.SiLU()))
        width = 112
    mods.append(nn.Linear(width, 12))
    return nn.Sequential(*mods)
