r"""The joint DP's feasibility pass in C (``milp_partition/joint/_jointdp.c``), behind :class:`JointDP`'s interface.

:class:`NativeJointDP` runs :meth:`~milp_partition.joint.dp.JointDP.feasible`'s pass in compiled code: the
same states :math:`D(I, s)`, the same prunings (a), (b), (b'), (c), (d) and the same order of relaxation,
so it reaches the same states and records the same proven lower bound; the exact knapsack of a stage is
computed in C as well (a Pareto frontier DP, as :func:`~milp_partition.joint.knapsack.min_cost_exact`).  The
plan it finds is rebuilt from its steps by the numpy tables of :class:`JointDP` (the stage values and
configurations) and re-checked by the verifier downstream, so the C code never reports a value itself.

The extension is optional (``setup.py`` builds it when a C compiler is there); :func:`available` says
whether it loaded, and :func:`native_dp` falls back to :class:`JointDP` where it did not or where the
pass needs what the C code does not do (a forced number of stages, Piper's greedy choice, or too many
ideals or pairs of ideals: see ``MAX_IDEALS`` and ``MAX_PAIRS``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from milp_partition.budget import Budget
from milp_partition.joint.dp import JointData, JointDP
from milp_partition.joint.problem import JointPlan

try:  # the compiled pass (optional: see setup.py)
    from milp_partition.joint import _jointdp as _ext  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _ext = None

#: the C pass keeps a cache slot per (ideal, sub-ideal, t) and its stage data where a pass reaches it: it runs
#: where the pairs (ideal, proper sub-ideal) times the number of degrees t are at most this (8 bytes a slot,
#: about 100 more per stage reached)
MAX_PAIRS = 64_000_000
#: counting the pairs takes L^2 / 2 subset tests (L ideals; about 0.3 s at 18,000): past this many ideals the C
#: pass does not run
MAX_IDEALS = 40_000


def available() -> bool:
    """Whether the compiled pass loaded."""
    return _ext is not None


def least_cost(cost: np.ndarray, mem: np.ndarray, memory_bytes: float) -> float | None:
    """:func:`~milp_partition.joint.knapsack.min_cost_exact`'s value (the least sum of ``cost``, one option per row,
    with the sum of ``mem`` at most ``memory_bytes``; ``inf`` where nothing fits) computed in C; ``None`` where the
    extension did not load."""
    if _ext is None:
        return None
    rows, width = cost.shape
    if rows == 0:
        return 0.0
    contiguous = (np.ascontiguousarray(x, dtype=np.float64) for x in (cost, mem))
    return float(_ext.knapsack(rows, width, *contiguous, float(memory_bytes)))


def pair_count(data: JointData) -> int:
    """The pairs (ideal, proper sub-ideal) of ``data``, counted once (cached on it); -1 past :data:`MAX_PAIRS`."""
    if data.pairs is None:
        words = np.ascontiguousarray(data.ideal_words, dtype=np.uint64)
        data.pairs = int(_ext.count_pairs(words, len(data.ideals), words.shape[1], MAX_PAIRS)) if _ext is not None else -1
    return data.pairs


def applies(data: JointData) -> bool:
    """Whether the exact search on ``data`` runs its passes in C (built; no forced number of stages; few enough pairs)."""
    forced = data.problem.shape.stages if data.problem.shape is not None else None
    if _ext is None or forced is not None or data.prefixes_only or len(data.ideals) > MAX_IDEALS:
        return False
    pairs = pair_count(data)
    return 0 <= pairs and pairs * len(data.degrees) <= MAX_PAIRS


def too_large(data: JointData) -> bool:
    """Whether the compiled passes are built and would run here but for ``data``'s ideals or pairs (more than
    :data:`MAX_IDEALS` or :data:`MAX_PAIRS`): its passes would run in numpy, for minutes (five branches of eight,
    59,049 ideals: 16% from the optimum after 60 s), so the solve takes the route of graphs past the ideal cap."""
    forced = data.problem.shape.stages if data.problem.shape is not None else None
    if _ext is None or forced is not None or data.prefixes_only:
        return False
    return not applies(data)


def native_dp(data: JointData, greedy: bool = False, share_tables: bool = True) -> JointDP:
    """:class:`NativeJointDP` where the compiled pass can run this search (:func:`applies`), else :class:`JointDP`."""
    if greedy or not share_tables or not applies(data):
        return JointDP(data, greedy=greedy, share_tables=share_tables)
    return NativeJointDP(data)


class NativeJointDP(JointDP):
    """:class:`JointDP` whose feasibility pass runs in C (see the module docstring)."""

    def __init__(self, data: JointData) -> None:
        super().__init__(data)
        #: relative difference allowed between a C sum and numpy's of the same terms (positive terms: n eps each)
        self.rounding = 1e-13 + 1e-15 * len(data.ids)
        #: the search stops at a gap of a few roundings (a strict pass proves ``best (1 - 3 r)``)
        self.proof_tolerance = max(1e-12, 4 * self.rounding)
        if _ext is None:
            raise RuntimeError("the compiled joint DP (milp_partition.joint._jointdp) is not built")
        self._ctx = _ext.new(*_context_args(data))

    def stats(self) -> dict[str, int]:
        """Counts of the C pass: pairs of ideals, stage tables built, exact knapsacks solved."""
        out: dict[str, int] = _ext.stats(self._ctx)
        return out

    def feasible(
        self, target: float, strict: bool = False, budget: Budget | None = None
    ) -> tuple[tuple[JointPlan, float] | None, float]:
        """As :meth:`JointDP.feasible`, the pass in C; its bounds derated by :attr:`rounding` (see :meth:`proven_above`).

        The C pass sums in another order than numpy, so its stage values may differ from the plan's
        (numpy, verifier) value in the last bits.  A strict pass runs non-strict at ``target (1 - 2 r)``
        (``r`` = :attr:`rounding`): a plan it finds is below ``target`` in numpy's arithmetic too; and every
        bound it returns is the C value times ``(1 - r)``.
        """
        self.passes += 1
        if budget is not None and budget.expired():
            raise TimeoutError
        # the C pass reads the monotonic clock (time.monotonic's on Linux) against this deadline
        deadline = math.inf if budget is None else time.monotonic() + budget.left()
        r = self.rounding
        run_at = target * (1 - 2 * r) if strict else target
        status, nxt, steps = _ext.feasible(self._ctx, float(run_at), False, deadline)
        if status == "timeout":
            raise TimeoutError
        if status == "none":  # every plan has a stage whose C value is above run_at
            return None, max(nxt, run_at) * (1 - r)
        return self._plan(steps), nxt * (1 - r)

    def proven_above(self, target: float, nxt: float) -> float:
        """The bound of a pass that found nothing: :meth:`feasible` returned it (derated for rounding)."""
        return nxt

    def proven_strict(self, best: float, nxt: float) -> float:
        """The bound of a strict pass that found nothing: a hair below ``best`` (:meth:`feasible`)."""
        return nxt

    def _plan(self, steps: list[tuple[int, int, int, int, int]]) -> tuple[JointPlan, float]:
        """The plan of the C pass's steps ``(i, j, s, d, t)`` (first stage first), with its DP value."""
        built = [self.stage(i, j, s, dp, t) for i, j, s, dp, t in steps]
        return JointPlan(tuple(stage for stage, _ in built)), max((value for _, value in built), default=0.0)


def _context_args(data: JointData) -> tuple[Any, ...]:
    """The arguments of ``_jointdp.new``: sizes (the number of device kinds among them), then C-contiguous arrays
    (int32, float64, uint64), the kinds' memory and device count first."""
    cl = data.problem.cluster
    degrees = list(data.degrees)
    n, E, L = len(data.ids), len(data.edge_src), len(data.ideals)
    nw = data.ideal_words.shape[1]
    smax = min(cl.device_count, data.problem.microbatches)

    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate([x.reshape(-1) for x in arrays]) if arrays else np.zeros(0))

    widths = [data.p[t].shape[1] for t in degrees]
    per_t = {name: cat([getattr(data, name)[t] for t in degrees]) for name in ("p", "w", "a", "b")}
    ein = cat([data.edge_in_bytes[t] for t in degrees])
    eout = cat([data.edge_out_bytes[t] for t in degrees])
    ideal_p = cat([data.ideal_p[t] for t in degrees])
    ideal_w = cat([data.ideal_w[t] for t in degrees])
    i32 = np.int32
    kind_memory, kind_count = cl.kind_arrays()  # the cluster's kinds as arrays (one kind: the C pass reads index 0)
    return (
        n, E, L, nw, len(degrees), len(data.divisors), len(kind_count), smax,
        float(cl.bandwidth_bytes_per_s), float(data.problem.microbatches),
        np.array(kind_memory, dtype=np.float64), np.array(kind_count, dtype=i32),
        np.array(degrees, dtype=i32), np.array(widths, dtype=i32),
        per_t["p"].astype(np.float64), per_t["w"].astype(np.float64),
        per_t["a"].astype(np.float64), per_t["b"].astype(np.float64),
        ein.astype(np.float64), eout.astype(np.float64),
        np.ascontiguousarray(data.edge_src, dtype=i32), np.ascontiguousarray(data.edge_tgt, dtype=i32),
        np.ascontiguousarray(data.ideal_words, dtype=np.uint64),
        np.ascontiguousarray(data.ideal_work, dtype=np.float64),
        ideal_p.astype(np.float64), ideal_w.astype(np.float64),
        np.array(data.divisors, dtype=i32),
    )  # fmt: skip
