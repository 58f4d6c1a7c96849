"""Stage chart of a heterogeneous plan (Sailor's problem): per stage, each replica group (kind, zone, tp) with its
compute per micro-batch and its memory against its kind's memory, and the stage's sends and all-reduce.

Bars carry ``gid`` ``time:Q:G`` (a group's compute per micro-batch, s), ``sends:Q`` (X_Q), ``allreduce:Q`` (AR_Q),
``memory:Q:G`` (a replica's bytes as the simulator charges them, drawn in GiB) and ``limit:Q:G`` (its kind's memory,
dashed); ``Q`` = stage from 1, ``G`` = the group's label ``<kind>_<zone> tp<t>``.  One colour per kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from milp_partition.plots import pyplot

GIB = 2**30


def _label(g: Mapping[str, Any]) -> str:
    return f"{g['kind']}_{g['zone']} tp{g['tp']}"


def figure(result: Mapping[str, Any], instance_path: str | None, options: Mapping[str, str]) -> Any:
    """Two panels over the stages: time per micro-batch (groups' compute, the stage's sends and all-reduce) and memory
    per replica group against its kind's memory."""
    plt = pyplot()
    stages = list(result.get("stages") or [])
    kinds = list(dict.fromkeys(g["kind"] for st in stages for g in st.get("groups", [])))
    colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(kinds)}
    width = max(2.0 + len(stages) * 1.6, 8.0)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(width, 7.5))
    ticks, names = [], []
    x = 0.0
    seen: set[str] = set()
    for q, st in enumerate(stages):
        groups = list(st.get("groups", []))
        start = x
        for g in groups:
            lab = _label(g)
            kind_label = g["kind"] if g["kind"] not in seen else None
            seen.add(g["kind"])
            hatch = {1: "", 2: "//", 4: "xx"}.get(int(g["tp"]), "..")
            (bar,) = ax1.bar(x, float(g["compute_s"]), 0.8, color=colours[g["kind"]], hatch=hatch, label=kind_label)
            bar.set_gid(f"time:{q + 1}:{lab}")
            ax1.text(x, float(g["compute_s"]), f"{g['replicas']}x tp{g['tp']}", ha="center", va="bottom", fontsize=7)
            (mb,) = ax2.bar(x, float(g["memory_bytes"]) / GIB, 0.8, color=colours[g["kind"]], hatch=hatch)
            mb.set_gid(f"memory:{q + 1}:{lab}")
            limit = ax2.hlines(float(g["memory_limit_bytes"]) / GIB, x - 0.4, x + 0.4, colors="black", linestyles="--")
            limit.set_gid(f"limit:{q + 1}:{lab}")
            x += 1.0
        (sb,) = ax1.bar(x, float(st.get("sends_s", 0.0)), 0.8, color="tab:gray", label="X (sends)" if q == 0 else None)
        sb.set_gid(f"sends:{q + 1}")
        (ab,) = ax1.bar(
            x + 1.0, float(st.get("allreduce_s", 0.0)), 0.8, color="tab:olive", label="AR (all-reduce)" if q == 0 else None
        )
        ab.set_gid(f"allreduce:{q + 1}")
        ticks.append((start + x + 1.0) / 2)
        names.append(f"stage {q + 1}\nlayers {st['layers'][0]}-{st['layers'][1] - 1}")
        x += 3.0
    objective = result.get("objective")
    plan = result.get("sailor_plan") or {}
    pl = (plan.get("pipeline_list") or [{}])[0]
    thr = result.get("throughput_it_s")
    head = (
        f"iteration {objective:.6g} s, {thr:.5g} it/s" if isinstance(objective, (int, float)) and thr else "no plan"
    ) + f" ({result.get('status')})"
    dp = (pl.get("dp") or ["?"])[0]
    ax1.set_title(f"{head}; mbs {plan.get('mbs')}, {len(stages)} stages x D = {dp}\n(hatch: tp 2 //, tp 4 xx)")
    ax1.set_ylabel("s per micro-batch")
    ax1.grid(axis="y", alpha=0.3)
    if stages:
        ax1.legend(fontsize=8)
    ax2.set_ylabel("memory per replica GPU (GiB)")
    ax2.set_title("memory as the simulator charges it (dashed: the kind's memory)")
    ax2.grid(axis="y", alpha=0.3)
    for ax in (ax1, ax2):
        ax.set_xlim(-1.0, max(x - 1.0, 2.0))
        ax.set_xticks(ticks)
        ax.set_xticklabels(names, fontsize=8)
    inst = result.get("instance") or {}
    fig.suptitle(str(inst.get("setting") or inst.get("source") or "hetero plan"))
    fig.tight_layout()
    return fig
