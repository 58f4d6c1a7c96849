"""Per-layer configurations of a strategy: one row per layer, its split factors as stacked log2 segments.

A segment's colour is the dimension it splits, named from the result's ``instance.dimensions``
(written by ``solve``: batch, heads, out features, ...; ``axis K`` where the layer's name does not
tell).  Past :data:`ROWS_PER_COLUMN` layers the rows wrap into side-by-side columns, so the
chart stays under :data:`MAX_HEIGHT_IN` inches tall whatever the number of layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from milp_partition.plots import pyplot

#: Layers per column of rows; more layers wrap into further columns.
ROWS_PER_COLUMN = 60
#: Height of the figure in inches at most (at the plot command's 120 dpi: 1,800 pixels).
MAX_HEIGHT_IN = 15.0


def _names(result: Mapping[str, Any], layer: str, rank: int) -> list[str]:
    recorded = ((result.get("instance") or {}).get("dimensions") or {}).get(layer)
    if isinstance(recorded, list) and len(recorded) == rank:
        return [str(n) for n in recorded]
    return [f"axis {k}" for k in range(rank)]


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """One horizontal row per layer: a segment of length log2(f) per split dimension (colour = dimension), labelled."""
    plt = pyplot()
    choice = dict(result.get("assignment") or {})
    layers = list(choice)
    columns = max(1, math.ceil(len(layers) / ROWS_PER_COLUMN))
    rows = math.ceil(len(layers) / columns) if layers else 1
    height = min(MAX_HEIGHT_IN, 1.6 + 0.22 * rows)
    fig, axes = plt.subplots(1, columns, figsize=(4.0 + 4.5 * columns, height), squeeze=False)
    cmap = plt.get_cmap("tab20")
    colours: dict[str, Any] = {}
    handles: dict[str, Any] = {}
    widest = 0.0
    for c in range(columns):
        ax = axes[0][c]
        chunk = layers[c * rows : (c + 1) * rows]
        for row, layer in enumerate(chunk):
            config = str(choice[layer])
            parts = config.split("x")
            names = _names(result, layer, len(parts))
            left = 0.0
            for dim, part in enumerate(parts):
                try:
                    factor = float(part)
                except ValueError:
                    factor = 1.0
                width = math.log2(factor) if factor > 1 else 0.0
                if width <= 0:
                    continue
                name = names[dim]
                colour = colours.setdefault(name, cmap(len(colours) % 20))
                (bar,) = ax.barh(row, width, left=left, color=colour, height=0.7)
                bar.set_gid(f"layer:{layer}:dim{dim}")
                handles.setdefault(name, bar)
                left += width
            ax.text(left + 0.05, row, config, va="center", fontsize=6)
            widest = max(widest, left)
        ax.set_yticks(range(len(chunk)))
        ax.set_yticklabels(chunk, fontsize=6 if rows <= 60 else 5)
        ax.set_ylim(rows - 0.5, -0.5)
    for c in range(columns):
        axes[0][c].set_xlim(0, widest * 1.3 + 1.0)
    fig.supxlabel("log2 of the split factor, stacked over the dimensions (total: log2 of the devices used)", fontsize=9)
    inst = result.get("instance") or {}
    fig.suptitle(
        f"{inst.get('name') or 'strategy'}: configuration per layer, cost {result.get('objective')} ({result.get('status')})",
        fontsize=10,
    )
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            title="dimension split",
            fontsize=7,
            loc="upper right",
            ncol=max(1, min(len(handles), 2 * columns)),
        )
    fig.tight_layout(rect=(0, 0, 1, 0.93 if columns > 1 else 0.9))
    return fig
