"""The placement solve's one deadline: phases cut short give weaker bounds that stay proven (no wall-clock asserts)."""

from __future__ import annotations

import math
import time

import pytest

from milp_partition.io.placement_instance import read_placement_instance
from milp_partition.placement.bounds import best_bound, transfer_flow
from milp_partition.placement.decompose import decompose, solve_decomposed
from milp_partition.placement.subgraph import main_line

#: Proven optima (results/placement_gap.md; README of the benchmarks: yolov5x).
GOOGLENET_OPT = 1.24132
YOLOV5X_OPT = 23.502


def _never(sub, limit):  # a segment solver that must not run once the deadline has passed
    raise AssertionError("a segment was solved after the deadline")


@pytest.mark.parametrize(("name", "optimum"), [("GoogLeNet", GOOGLENET_OPT), ("yolov5x", YOLOV5X_OPT)])
def test_decomposition_past_its_deadline_still_gives_a_valid_bound(shared_benchmarks, name, optimum):
    problem = read_placement_instance(shared_benchmarks / "placement" / f"{name}.json")
    dec = decompose(problem)
    assert dec.useful
    out = solve_decomposed(problem, dec, _never, time_limit_s=60.0, deadline=time.monotonic() - 1.0)
    assert out.solves == 0 and out.solution is None and not out.all_optimal
    assert 0 < out.bound <= optimum * (1 + 1e-9)  # each pair's device-path bound: weaker, still proven
    # not weaker than the whole problem's critical path, which it sums over the segments
    assert out.bound >= best_bound(problem, flow=False).values["critical_path"] * (1 - 1e-9)


def test_transfer_flow_cut_short_is_zero_or_valid(shared_benchmarks):
    problem = read_placement_instance(shared_benchmarks / "placement" / "GoogLeNet.json")
    full = transfer_flow(problem)
    short = transfer_flow(problem, time_limit_s=1e-3)
    assert 0.0 <= short <= full * (1 + 1e-9) and full <= GOOGLENET_OPT * (1 + 1e-9)
    skipped = best_bound(problem, flow_time_limit_s=0.0)
    assert "transfer_flow" not in skipped.values and skipped.best <= GOOGLENET_OPT


def test_main_line_search_stops_at_its_deadline(shared_benchmarks):
    problem = read_placement_instance(shared_benchmarks / "placement" / "transformer.json")
    assert main_line(problem, deadline=time.monotonic() - 1.0) is None
    assert math.isfinite(best_bound(problem, flow=False).best)


def test_pairs_past_the_deadline_get_a_cheap_bound_only_up_to_a_count(shared_benchmarks, monkeypatch):
    """Past its deadline the decomposition gives at most ``CHEAP_PAIRS`` pairs their segment's device-path bound (a
    millisecond each: 64,000 pairs ran 60 s past a 10 s limit) and the rest bound 0: the bound stays valid (at most
    the proven optimum) and no segment is solved.  yolov5x has 960 pairs; the count is set to 40 here."""
    from milp_partition.placement import decompose as dmod

    problem = read_placement_instance(shared_benchmarks / "placement" / "yolov5x.json")
    dec = decompose(problem)
    calls = [0]
    cheap = dmod._cheap_value

    def counted(*args):
        calls[0] += 1
        return cheap(*args)

    monkeypatch.setattr(dmod, "CHEAP_PAIRS", 40)
    monkeypatch.setattr(dmod, "_cheap_value", counted)
    out = solve_decomposed(problem, dec, _never, time_limit_s=60.0, deadline=time.monotonic() - 1.0)
    assert calls[0] == 40 and out.solves == 0 and out.solution is None
    assert 0 <= out.bound <= YOLOV5X_OPT * (1 + 1e-9)
