"""Stage chart of a Galvatron plan: each stage's compute C and synced time R per micro-batch, its memory against the
usable limit, and every layer's strategy as a coloured cell.

Bars carry ``gid`` ``time:Q`` (C), ``sync:Q`` (R) and ``memory:Q`` (MiB, as the report; ``Q`` = stage from 1); the
usable memory is a dashed line with ``gid`` ``limit``; layer cells carry ``layer:L`` (``L`` = layer index from 0), one colour per strategy
label (Galvatron's ``pp-tp_sp[*]-dp[f][-c][-sp]``; legend in the panel).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from milp_partition.plots import pyplot
from milp_partition.units import parse_bytes


def _usable_mb(result: Mapping[str, Any], options: Mapping[str, str]) -> int | None:
    """Galvatron's usable memory of the result's setting (``--memory`` overrides it): M - int(0.2 M) above 20 GiB."""
    if options.get("memory"):
        m = parse_bytes(options["memory"], "--memory") // 1048576
    else:
        value = (result.get("instance") or {}).get("memory_mb")
        if not isinstance(value, int):
            return None
        m = value
    return m - int(m * 0.2) if m // 1024 > 20 else m


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """Three panels over the stages: C and R per micro-batch, memory with the limit, the layers' strategies."""
    plt = pyplot()
    stages = list(result.get("stages") or [])
    fig, (ax1, ax2, ax3) = plt.subplots(
        3, 1, figsize=(max(10.0, 1.2 * len(stages) + 6), 9), gridspec_kw={"height_ratios": [3, 3, 2]}
    )
    for q, st in enumerate(stages):
        (bc,) = ax1.bar(q - 0.2, float(st.get("compute_s", 0.0)), 0.4, color="tab:blue", label="C (compute)" if q == 0 else None)
        bc.set_gid(f"time:{q + 1}")
        (br,) = ax1.bar(
            q + 0.2, float(st.get("sync_s", 0.0)), 0.4, color="tab:orange", label="R (with gradient sync)" if q == 0 else None
        )
        br.set_gid(f"sync:{q + 1}")
        (bm,) = ax2.bar(q, float(st.get("memory_mb", 0)), color="tab:green")
        bm.set_gid(f"memory:{q + 1}")
    objective = result.get("objective")
    cfg = result.get("galvatron_config") or {}
    head = f"sound 1F1B time {objective:.6g} s" if isinstance(objective, (int, float)) else "no plan"
    ax1.set_title(f"{head} ({result.get('status')}); pp {cfg.get('pp_deg')}, {cfg.get('chunks')} micro-batches")
    ax1.set_ylabel("s per micro-batch")
    ax1.grid(axis="y", alpha=0.3)
    if stages:
        ax1.legend(fontsize=8)
    limit = _usable_mb(result, options)
    if limit is not None and stages:
        ax2.hlines(limit, -0.5, len(stages) - 0.5, colors="black", linestyles="--").set_gid("limit")
    ax2.set_ylabel("memory per GPU (MiB)")
    ax2.set_title(
        'memory as Galvatron charges it, MiB (its "MB")' + (f" (dashed: usable {limit} MiB)" if limit is not None else "")
    )
    names = [f"stage {q + 1}\nlayers {st['layers'][0]}-{st['layers'][1] - 1}" for q, st in enumerate(stages)]
    pad = 0.6 if len(stages) <= 1 else 0.1  # a single stage's bars would otherwise fill the axis (-0.4..0.4)
    for ax in (ax1, ax2):
        ax.set_xlim(-0.5 - pad, max(len(stages), 1) - 0.5 + pad)
        ax.set_xticks(range(len(stages)))
        ax.set_xticklabels(names, fontsize=8)
    ax2.grid(axis="y", alpha=0.3)
    _strategy_strip(ax3, stages, plt)
    fig.suptitle(str((result.get("instance") or {}).get("source") or "galvatron plan").rsplit("/", 1)[-1])
    fig.tight_layout()
    return fig


def _strategy_strip(ax: Any, stages: list[Mapping[str, Any]], plt: Any) -> None:
    """One cell per layer, coloured by its strategy label; stage boundaries as vertical lines."""
    labels = [lab for st in stages for lab in st.get("strategies", [])]
    kinds = list(dict.fromkeys(labels))
    cmap = plt.get_cmap("tab20")
    for layer, lab in enumerate(labels):
        k = kinds.index(lab)
        (cell,) = ax.bar(layer, 1, 1.0, color=cmap(k % 20), edgecolor="white", label=lab if labels.index(lab) == layer else None)
        cell.set_gid(f"layer:{layer}")
    for st in stages[1:]:
        ax.axvline(st["layers"][0] - 0.5, color="black")
    ax.set_yticks([])
    ax.set_xlabel("layer (black lines: stage boundaries)")
    ax.set_title("strategy per layer: pp-tp_sp[*]-dp[f][-c][-sp] (f ZeRO-3, c checkpointed, sp Ulysses)", fontsize=9)
    if labels:
        ax.legend(fontsize=7, ncol=min(6, len(kinds)), loc="upper center", bbox_to_anchor=(0.5, -0.35))
