"""The busy-rank layer times of the calibration (run/empty.py): each pass priced by its slowest rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from milp_partition.run.empty import slowest_rank_layers


def test_each_pass_takes_its_slowest_rank_and_each_node_the_median_over_passes() -> None:
    # two ranks, two nodes, three passes: rank 0 is slowest in passes 0 and 2 (totals 10 > 6, 12 > 9), rank 1 in pass 1
    r0 = {"a": [[1.0, 1.0, 2.0], [4.0, 1.0, 5.0]], "b": [[2.0, 1.0, 2.0], [3.0, 1.0, 3.0]]}  # totals 10, 4, 12
    r1 = {"a": [[1.0, 3.0, 1.0], [2.0, 3.0, 3.0]], "b": [[1.0, 2.0, 2.0], [2.0, 2.0, 3.0]]}  # totals 6, 10, 9
    got = slowest_rank_layers([r0, r1])
    # node a: forward over passes (r0, r1, r0) = 1, 3, 2 -> median 2; backward 4, 3, 5 -> 4
    assert got["a"] == (2.0, 4.0)
    # node b: forward 2, 2, 2 -> 2; backward 3, 2, 3 -> 3
    assert got["b"] == (2.0, 3.0)
    # one rank: its own medians
    assert slowest_rank_layers([r1])["a"] == (1.0, 3.0)


def test_the_slowest_rank_is_never_faster_than_the_mean_of_ranks() -> None:
    """One node with no backward: its time is the median over passes of the largest rank's, at least the median of the
    ranks' mean (what the calibration priced before)."""
    import random
    import statistics

    rng = random.Random(0)
    for _ in range(50):
        passes, n_ranks = rng.randint(1, 7), rng.randint(1, 3)
        ranks = [{"x": [[rng.uniform(0.1, 2.0) for _ in range(passes)], [0.0] * passes]} for _ in range(n_ranks)]
        f, g = slowest_rank_layers(ranks)["x"]
        assert g == 0.0
        assert f == pytest.approx(statistics.median(max(r["x"][0][k] for r in ranks) for k in range(passes)))
        assert f >= statistics.median(statistics.fmean(r["x"][0][k] for r in ranks) for k in range(passes)) - 1e-12


def test_ranks_that_timed_different_things_are_refused() -> None:
    with pytest.raises(ValueError, match="different"):
        slowest_rank_layers([{"a": [[1.0], [1.0]]}, {"a": [[1.0, 2.0], [1.0, 2.0]]}])
    with pytest.raises(ValueError, match="different"):
        slowest_rank_layers([{"a": [[1.0], [1.0]]}, {"b": [[1.0], [1.0]]}])


def test_what_ddp_added_is_the_slowest_ranks_difference_median_over_passes() -> None:
    from milp_partition.run.empty import ddp_added_s

    # pass k: (plain, under DDP) per rank; slowest under DDP less slowest plain: 5 - 3 = 2, 4 - 2 = 2, 9 - 3 = 6
    r0 = [(3.0, 5.0), (1.0, 4.0), (3.0, 9.0)]
    r1 = [(2.0, 4.0), (2.0, 3.0), (1.0, 2.0)]
    assert ddp_added_s([r0, r1]) == 2.0
    assert ddp_added_s([[(2.0, 1.0)]]) == 0.0  # DDP faster than plain (noise): nothing added, never negative
    with pytest.raises(ValueError, match="different numbers"):
        ddp_added_s([r0, r1[:2]])
    with pytest.raises(ValueError, match="none"):
        ddp_added_s([[], []])


def test_lockstep_timing_gives_every_pass_and_a_ddp_pair_per_pass(tmp_path: Path) -> None:
    """time_layers_in_lockstep on a one-rank gloo group: every node's forward and backward per pass at each size, and
    at the DDP sizes one (plain, under DDP) pair per pass, both positive.  A node's time is never negative and each
    pass's nodes sum to a positive time (a tiny node can be 0: the hooks' even share came off it, LayerTimer)."""
    pytest.importorskip("torch")
    import torch.distributed as dist

    from milp_partition.run.predict import time_layers_in_lockstep
    from tests.one_rank import one_rank_group, small_mlp_graph

    graph, data = small_mlp_graph(tmp_path)
    with one_rank_group(tmp_path):
        got = time_layers_in_lockstep(data, str(graph), [1, 2], dist.barrier, repeats=3, ddp={1: (dist.group.WORLD, (2,))})
    nodes = [n["id"] for n in data["nodes"] if not n["id"].endswith(":bwd")]
    assert set(got.layers) == {1, 2} and all(list(got.layers[b]) == nodes for b in (1, 2))
    assert all(len(f) == 3 and len(g) == 3 and all(x >= 0 for x in f + g) for t in got.layers.values() for f, g in t.values())
    assert all(sum(t[v][0][k] for v in nodes) > 0 for t in got.layers.values() for k in range(3))
    assert set(got.ddp_totals) == {(1, 2)} and len(got.ddp_totals[(1, 2)]) == 3
    assert all(plain > 0 and under > 0 for plain, under in got.ddp_totals[(1, 2)])
