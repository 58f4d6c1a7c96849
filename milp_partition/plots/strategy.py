"""Per-layer configurations of a strategy: one row per layer, its split factors as stacked log2 segments."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from milp_partition.plots import pyplot


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """One horizontal row per layer: a segment of length log2(f) per split dimension (colour = dimension), labelled."""
    plt = pyplot()
    choice = dict(result.get("assignment") or {})
    layers = list(choice)
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.22 * max(1, len(layers))))
    cmap = plt.get_cmap("tab10")
    dims_seen: set[int] = set()
    widest = 0.0
    for row, layer in enumerate(layers):
        config = str(choice[layer])
        left = 0.0
        parts = config.split("x")
        for dim, part in enumerate(parts):
            try:
                factor = float(part)
            except ValueError:
                factor = 1.0
            width = math.log2(factor) if factor > 1 else 0.0
            if width <= 0:
                continue
            label = f"dimension {dim}" if dim not in dims_seen else None
            dims_seen.add(dim)
            (bar,) = ax.barh(row, width, left=left, color=cmap(dim % 10), height=0.7, label=label)
            bar.set_gid(f"layer:{layer}:dim{dim}")
            left += width
        ax.text(left + 0.05, row, config, va="center", fontsize=6)
        widest = max(widest, left)
    ax.set_yticks(range(len(layers)))
    ax.set_yticklabels(layers, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("log2 of the split factor, stacked over the dimensions (total: log2 of the devices used)")
    inst = result.get("instance") or {}
    ax.set_title(
        f"{inst.get('name') or 'strategy'}: configuration per layer, cost {result.get('objective')} ({result.get('status')})"
    )
    ax.set_xlim(0, widest * 1.3 + 1.0)
    if dims_seen:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
