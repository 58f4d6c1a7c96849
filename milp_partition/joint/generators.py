"""Larger joint instances: BERT with more transformer layers (from the shared ones), and wide graphs.

:func:`repeat_block` takes a graph whose repeated block (the most frequent node name,
e.g. ``ParallelTransformerLayer``) forms a chain ``L_1 -> L_2 -> ... -> L_m`` and gives it
``layers`` blocks: the first and last keep their own configurations and outside edges,
every block in between copies a middle block (its configurations, its edge from the
previous block and its edges from nodes outside the chain, e.g. BERT's attention mask).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from milp_partition.errors import InputError
from milp_partition.joint.problem import JointConfig, JointEdge, JointNode, JointProblem, joint_cluster


def _chain(problem: JointProblem, name: str) -> list[str]:
    members = [n.id for n in problem.nodes if n.name == name]
    inside = set(members)
    nxt = {e.source: e.target for e in problem.edges if e.source in inside and e.target in inside}
    heads = [v for v in members if v not in set(nxt.values())]
    if len(heads) != 1:
        raise InputError(f"the blocks named {name!r} do not form one chain", source=problem.source)
    chain = [heads[0]]
    while chain[-1] in nxt:
        chain.append(nxt[chain[-1]])
    if len(chain) != len(members):
        raise InputError(f"the blocks named {name!r} do not form one chain", source=problem.source)
    return chain


def _rekey(cfg: JointConfig, fw: dict[str, str], bw: dict[str, str]) -> JointConfig:
    return replace(
        cfg,
        sync_fw_bytes={fw.get(u, u): x for u, x in cfg.sync_fw_bytes.items()},
        sync_bw_bytes={bw.get(u, u): x for u, x in cfg.sync_bw_bytes.items()},
    )


def repeat_block(problem: JointProblem, layers: int, name: str | None = None) -> JointProblem:
    """The same model with ``layers`` repeated blocks (see the module docstring)."""
    if name is None:
        name = Counter(n.name for n in problem.nodes).most_common(1)[0][0]
    chain = _chain(problem, name)
    if len(chain) < 3 or layers < 2:
        raise InputError("need a chain of at least 3 blocks and at least 2 layers", source=problem.source)
    first, middle, last = chain[0], chain[1], chain[-1]
    inside = set(chain)
    keep_nodes = [n for n in problem.nodes if n.id not in inside or n.id in (first, last)]
    keep_edges = [
        e
        for e in problem.edges
        if not (e.source in inside and e.target in inside)
        and not (e.target in inside and e.target not in (first, last))
        and not (e.source in inside and e.source not in (first, last))
    ]
    mid_node = problem.node(middle)
    mid_in_chain = next(e for e in problem.edges if e.target == middle and e.source in inside)
    mid_outside_in = [e for e in problem.edges if e.target == middle and e.source not in inside]
    mid_next = next(e for e in problem.edges if e.source == middle and e.target in inside)
    used = {n.id for n in problem.nodes}
    new_ids: list[str] = []
    q = 0
    while len(new_ids) < layers - 2:
        cand = f"{name}_{q}"
        q += 1
        if cand not in used:
            new_ids.append(cand)
    order = [first, *new_ids, last]
    nodes: list[JointNode] = []
    edges: list[JointEdge] = list(keep_edges)
    for pos, v in enumerate(order):
        prev = order[pos - 1] if pos > 0 else None
        nxt = order[pos + 1] if pos + 1 < len(order) else None
        if v == first:
            assert nxt is not None, "a repeated block has at least two nodes"
            src = problem.node(first)
            old_next = next(e.target for e in problem.edges if e.source == first and e.target in inside)
            cfgs = {t: tuple(_rekey(c, {}, {old_next: nxt}) for c in cs) for t, cs in src.configs.items()}
            nodes.append(replace(src, configs=cfgs))
        elif v == last:
            assert prev is not None, "a repeated block has at least two nodes"
            src = problem.node(last)
            old_prev = next(e.source for e in problem.edges if e.target == last and e.source in inside)
            cfgs = {t: tuple(_rekey(c, {old_prev: prev}, {}) for c in cs) for t, cs in src.configs.items()}
            nodes.append(replace(src, configs=cfgs))
        else:
            assert prev is not None and nxt is not None, "an inner node has neighbours on both sides"
            cfgs = {
                t: tuple(_rekey(c, {mid_in_chain.source: prev}, {mid_next.target: nxt}) for c in cs)
                for t, cs in mid_node.configs.items()
            }
            nodes.append(JointNode(v, name, cfgs))
            edges.extend(JointEdge(e.source, v, e.bytes) for e in mid_outside_in)
        if nxt is not None:
            edges.append(JointEdge(v, nxt, mid_next.bytes))
    dropped = inside - {first, last}

    def outside_map(m, into_middle: bool):
        out = {u: x for u, x in m.items() if u not in dropped}
        if middle in m:
            out.update(dict.fromkeys(new_ids, m[middle]))
        return out

    others = [
        replace(
            n,
            configs={
                t: tuple(
                    replace(
                        c, sync_fw_bytes=outside_map(c.sync_fw_bytes, False), sync_bw_bytes=outside_map(c.sync_bw_bytes, True)
                    )
                    for c in cs
                )
                for t, cs in n.configs.items()
            },
        )
        for n in keep_nodes
        if n.id not in (first, last)
    ]
    by_id = {n.id: n for n in [*others, *nodes]}
    ordered = [by_id[n.id] for n in problem.nodes if n.id in by_id and n.id not in inside]
    all_nodes = [*ordered[: _pos(problem, first)], *nodes, *ordered[_pos(problem, first) :]]
    return replace(problem, nodes=tuple(all_nodes), edges=tuple(edges), name=f"{problem.name or 'model'} x{layers}")


def _pos(problem: JointProblem, node_id: str) -> int:
    """How many non-chain nodes precede ``node_id`` in the file's order."""
    count = 0
    for n in problem.nodes:
        if n.id == node_id:
            return count
        if n.name != problem.node(node_id).name:
            count += 1
    return count


def parallel_branches(
    branches: int,
    depth: int,
    devices: int,
    memory_bytes: float,
    seed: int = 0,
    microbatches: int = 64,
    bandwidth_bytes_per_s: float = 25 * 2**30,
) -> JointProblem:
    """A wide layer graph: a source, ``branches`` parallel chains of ``depth`` layers, a sink.

    It has ``(depth + 1) ** branches + 2`` ideals or so, past the exact DP's cap for six
    branches of depth eight; each layer offers t in {1, 2}, each with a plain and a
    recomputing configuration (seeded random costs: p in milliseconds per sample, bytes in MiB).
    """
    rng = random.Random(seed)
    mib = float(2**20)
    ids = ["source"] + [f"b{b}.{j}" for b in range(branches) for j in range(depth)] + ["sink"]
    edges = []
    for b in range(branches):
        edges.append(JointEdge("source", f"b{b}.0", rng.randint(1, 8) * mib))
        edges += [JointEdge(f"b{b}.{j}", f"b{b}.{j + 1}", rng.randint(1, 8) * mib) for j in range(depth - 1)]
        edges.append(JointEdge(f"b{b}.{depth - 1}", "sink", rng.randint(1, 8) * mib))
    nodes = []
    for v in ids:
        p = rng.uniform(1e-3, 4e-3)
        w, a, b_fixed = rng.randint(4, 64) * mib, rng.randint(8, 128) * mib, rng.randint(16, 256) * mib
        configs = {}
        for t in (1, 2):
            share = 1.0 if t == 1 else 0.55  # a split layer pays some overhead
            configs[t] = (
                JointConfig("vanilla", p * share, w / t, a / t, b_fixed / t),
                JointConfig("activation recomp", p * share * 4 / 3, w / t, a / t / 8, b_fixed / t),
            )
        nodes.append(JointNode(v, v.split(".")[0], configs))
    cluster = joint_cluster(devices, memory_bytes, bandwidth_bytes_per_s)
    return JointProblem(
        tuple(nodes),
        tuple(edges),
        cluster,
        microbatches,
        name=f"branches{branches}x{depth}",
        source=f"parallel_branches({branches}, {depth}, seed={seed})",
    )
