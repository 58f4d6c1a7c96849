"""The hetero search's compiled inner loop (``milp_partition/hetero/_hetero.c``), optional.

:func:`two_step` is the two-column device step of the search's tables (:func:`milp_partition.hetero.search._two_step`)
computed in C: the same values bit for bit (every finite entry is a whole number of devices, so the sums are exact
and the minima the same in any order).  ``setup.py`` builds the extension when a C compiler is there; without it
:func:`two_step` returns None and the search runs its numpy step.  ``MILP_PARTITION_NO_NATIVE=1`` in the
environment when the module is imported turns the compiled path off (the tests run both paths and compare).
"""

from __future__ import annotations

import os

import numpy as np

try:  # the compiled step (optional: see setup.py)
    from milp_partition.hetero import _hetero as _ext  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _ext = None


#: ``MILP_PARTITION_NO_NATIVE`` set (read once, at import: the search asks at every node)
_OFF = bool(os.environ.get("MILP_PARTITION_NO_NATIVE"))


def available() -> bool:
    """Whether the compiled step loaded and is not turned off by ``MILP_PARTITION_NO_NATIVE`` (read at import; the
    tests turn it off by setting ``_ext`` to None)."""
    return _ext is not None and not _OFF


def two_step(nxt: np.ndarray, d: int, t0: int, t1: int) -> np.ndarray | None:
    """conv[e][a] = min over n of nxt[e][a - n t0] + (d - n) t1 (the definition in
    :func:`milp_partition.hetero.search._two_step`), in C; None when the extension is not available.

    Parameters
    ----------
    nxt : np.ndarray
        [e][a]: whole numbers of devices or inf, two-dimensional.
    d : int
        Replicas of the stage (D).
    t0, t1 : int
        The stage's least tp on column 0 and column 1 (0: the column is not allowed).
    """
    if not available():
        return None
    src = np.ascontiguousarray(nxt, dtype=np.float64)
    out = np.empty_like(src)
    rows, width = src.shape
    _ext.two_step(src, out, rows, width, int(d), int(t0), int(t1))  # type: ignore[union-attr]
    return out


def two_layer(nxt: np.ndarray, t0m: np.ndarray, t1m: np.ndarray, d: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """One stage of the two-column table (:meth:`milp_partition.hetero.search._Triple.two_tables`): out[s0][a] = the
    least over e of :func:`two_step` (nxt, d, t0m[s0][e], t1m[s0][e]) [e][a] (a pair (0, 0): no configuration,
    skipped; inf where none), in C; None when the extension is not available.

    Parameters
    ----------
    nxt : np.ndarray
        [e][a], (L + 1) x width: whole numbers of devices or inf.
    t0m, t1m : np.ndarray
        [s0][e], (L + 1) x (L + 1): the least allowed tp on column 0 and 1 (0: none), each in 0..4.
    d : int
        Replicas of the stage (D).
    out : np.ndarray, optional
        Where to write (C-contiguous float64 of nxt's shape, not nxt itself), returned; a new array when None.
    """
    if not available():
        return None
    src = np.ascontiguousarray(nxt, dtype=np.float64)
    rows, width = src.shape
    if out is None:
        out = np.empty_like(src)
    a0 = np.ascontiguousarray(t0m, dtype=np.int64)
    a1 = np.ascontiguousarray(t1m, dtype=np.int64)
    _ext.two_layer(src, a0, a1, out, rows, width, int(d))  # type: ignore[union-attr]
    return out


def lambda_suffix(masks: np.ndarray, w: np.ndarray, bits: np.ndarray | None = None) -> np.ndarray | None:
    """:func:`milp_partition.hetero.search._lambda_suffix` (sfx[k][t][s0], masks [k][c][s0][e], weights w [t][c]) in
    C; None when the extension is not available.  ``bits`` (C-contiguous int64 [k][s0][e], optional): written with
    bit c set where masks[k][c][s0][e] is (the configurations allowed, as one integer; at most 62 configurations)."""
    if not available():
        return None
    p, nk, l1, _l1 = masks.shape
    m = np.ascontiguousarray(masks, dtype=np.bool_).view(np.uint8)
    wc = np.ascontiguousarray(w, dtype=np.float64)
    out = np.empty((p + 1, wc.shape[0], l1))
    _ext.lambda_suffix(m, wc, out, bits, p, nk, wc.shape[0], l1)  # type: ignore[union-attr]
    return out


def lambda_first(ylb: np.ndarray, w: np.ndarray, thr: float) -> np.ndarray | None:
    """:func:`milp_partition.hetero.search._lambda_first_under` (the row sfx[0][t][0] of the weighted device suffix
    program with masks ``ylb <= thr``; ``ylb`` [k][c][s0][e] inf wherever e <= s0, ``thr`` finite) in C, computing
    only the states a split from layer 0 reaches; None when the extension is not available (or is an older build
    without it)."""
    if not available() or not hasattr(_ext, "lambda_first"):
        return None
    y = np.ascontiguousarray(ylb, dtype=np.float64)
    p, nk, l1, _l1 = y.shape
    wc = np.ascontiguousarray(w, dtype=np.float64)
    out = np.empty(wc.shape[0])
    _ext.lambda_first(y, wc, out, float(thr), p, nk, wc.shape[0], l1)  # type: ignore[union-attr]
    return out


def ar_dp(table: np.ndarray, tps: list[int], budget: int, pmax: int) -> np.ndarray | None:
    """:meth:`milp_partition.hetero.search._Search.ar_split`'s program in C: out[j][b] = the least, over j stages from
    layer 0 within tp budget b, of the largest stage's ``table`` value (``table`` [i][s][e] at least tp ``tps[i]``, inf
    where e <= s, no NaN); None when the extension is not available (or is an older build without it)."""
    if not available() or not hasattr(_ext, "ar_dp"):
        return None
    tab = np.ascontiguousarray(table, dtype=np.float64)
    ntp, l1, _l1 = tab.shape
    tp_arr = np.ascontiguousarray(tps, dtype=np.int64)
    out = np.empty((pmax + 1, budget + 1))
    _ext.ar_dp(tab, tp_arr, out, ntp, l1, int(budget), int(pmax))  # type: ignore[union-attr]
    return out


def lagrange_suffix(ylb: np.ndarray, wm: np.ndarray) -> np.ndarray | None:
    """:func:`milp_partition.hetero.search._lagrange_suffix` (G[n][k][s0] from ylb [k][c][s][e], inf where not allowed,
    and wm [n][c]) in C: the same additions and minima; None when the extension is not available (or is an older
    build without it)."""
    if not available() or not hasattr(_ext, "lagrange_suffix"):
        return None
    y = np.ascontiguousarray(ylb, dtype=np.float64)
    p, nk, l1, _l1 = y.shape
    wc = np.ascontiguousarray(wm, dtype=np.float64)
    out = np.empty((wc.shape[0], p + 1, l1))
    _ext.lagrange_suffix(y, wc, out, p, nk, wc.shape[0], l1)  # type: ignore[union-attr]
    return out


def two_use(g: np.ndarray, d: int, t0: int, t1: int, nlo: int, nhi: int) -> np.ndarray | None:
    """out[a] = the least over n in [nlo, nhi] with a - n t0 >= 0 of g[a - n t0] + (d - n) t1 (inf where none):
    :meth:`milp_partition.hetero.search._Triple.two_use` in C; None when the extension is not available.  ``g``
    must be a contiguous float64 vector (the search's own arrays are)."""
    if not available():
        return None
    out = np.empty_like(g)
    _ext.two_use(g, out, g.shape[0], int(d), int(t0), int(t1), int(nlo), int(nhi))  # type: ignore[union-attr]
    return out


def two_fits(g: np.ndarray, nxt: np.ndarray) -> float | None:
    """The least over a of g[a] + nxt[width - 1 - a] (:meth:`milp_partition.hetero.search._Triple.two_ok`'s sum) in
    C; None when the extension is not available.  Both contiguous float64 vectors of one width."""
    if not available():
        return None
    return float(_ext.two_fits(g, nxt, g.shape[0]))  # type: ignore[union-attr]


def split_dp(yk: np.ndarray, tps: list[int], budget: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:meth:`milp_partition.hetero.search._Search.root_split`'s programs over (stage, first layer, tp budget) in C:
    (least max_i y_i, least sum_i y_i) of the first layer per budget 0..budget; ``yk`` [k][tp index][s0][e] is each
    stage's least y among the configurations of that tp.  None when the extension is not available."""
    if not available():
        return None
    y = np.ascontiguousarray(yk, dtype=np.float64)
    p, ntp, l1, _l1 = y.shape
    gmax0, gsum0 = np.empty(budget + 1), np.empty(budget + 1)
    t = np.ascontiguousarray(tps, dtype=np.int64)
    _ext.split_dp(y, t, gmax0, gsum0, p, l1, ntp, int(budget))  # type: ignore[union-attr]
    return gmax0, gsum0


def stage_scan(
    arrays: tuple[np.ndarray, ...],
    ends: np.ndarray,
    s: int,
    last: bool,
    scalars: tuple[float, ...],
    two: tuple[np.ndarray, np.ndarray, np.ndarray, int, float] | None = None,
    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The (end, set) pairs one node of the search keeps (:meth:`milp_partition.hetero.search._Triple.scan`, whose
    numpy form is the definition) in C: (cand [n][Q], cnt [n], minlb [n], basemin [n]); None when the extension is
    not available.

    Parameters
    ----------
    arrays : tuple of np.ndarray
        (cq, aq, uq, arq, set_bits, allowed, ymax2, ysum2, bhere, restsum, restmax, usage, used, sfx, caps), each
        C-contiguous (float64; set_bits and allowed int64), in the shapes :meth:`_Triple.scan` documents.
    ends : np.ndarray
        int64, the stage's end layers in the order the node visits them.
    s : int
        The stage's first layer.
    last : bool
        Whether the stage is the last (no forward send).
    scalars : tuple of float
        (ka, kb, m - 1, floor_y, umax, armax, umin, ar_floor, value, 1 - PRUNE_REL).
    two : tuple, optional
        Two columns: (g, twoq, nxt, d, cap1): a kept set must also pass the two-column device test of
        :meth:`milp_partition.hetero.search._Triple.two_ok` on :meth:`~milp_partition.hetero.search._Triple.two_use`
        (g [W] float64, twoq [Q][4] int64 per set (t0, t1, least n, most n), nxt [L1][W] float64, all inf where no
        completion).
    out : tuple of np.ndarray, optional
        Buffers to write into and return (cand int64 [at least n][Q], cnt int64, minlb, basemin float64 [at least n]:
        the first n rows are this call's), reused by the caller between calls; new arrays when None.
    """
    if not available():
        return None
    cq = arrays[0]
    nq, l1 = cq.shape[0], cq.shape[1]
    nt = arrays[11].shape[1]
    n = ends.shape[0]
    if out is None:
        cand, cnt, minlb, basemin = np.empty((n, nq), dtype=np.int64), np.empty(n, dtype=np.int64), np.empty(n), np.empty(n)
    else:
        cand, cnt, minlb, basemin = out
    if two is not None:
        g, twoq, nxt, d, cap1 = two
        extra, width, flag = (g, twoq, nxt), g.shape[0], 1
    else:
        empty = np.zeros(1)
        extra, width, d, cap1, flag = (empty, np.zeros(4, dtype=np.int64), empty), 1, 0, 0.0, 0
    _ext.stage_scan(  # type: ignore[union-attr]
        ends,
        *arrays,
        cand,
        cnt,
        minlb,
        basemin,
        *extra,
        int(s),
        int(bool(last)),
        nq,
        nt,
        l1,
        n,
        int(width),
        int(d),
        flag,
        *scalars,
        float(cap1),
    )
    return cand, cnt, minlb, basemin


def bottleneck(ylb: np.ndarray, masks: np.ndarray, upper: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`milp_partition.hetero.search._bottleneck_arr` (its numpy form is the definition) in C: (rmax, rsum) as
    (P + 1) x (L + 1) and each stage's least y over its allowed configurations [k][s0][e]; ``ylb`` and ``masks``
    [k][c][s0][e].  None when the extension is not available (or is an older build without it).  ``upper``: ``ylb`` is
    inf wherever e <= s0 (the search's is): the same values, with fewer entries read."""
    if not available() or not hasattr(_ext, "bottleneck"):
        return None
    p, nk, l1, _l1 = ylb.shape
    rmax, rsum, ymin = np.empty((p + 1, l1)), np.empty((p + 1, l1)), np.empty((p, l1, l1))
    _ext.bottleneck(  # type: ignore[union-attr]
        np.ascontiguousarray(ylb, dtype=np.float64),
        np.ascontiguousarray(masks, dtype=np.bool_).view(np.uint8),
        rmax,
        rsum,
        ymin,
        p,
        nk,
        l1,
        bool(upper),
    )
    return rmax, rsum, ymin


def span_dp(
    masks: np.ndarray,
    ylb: np.ndarray,
    ymin: np.ndarray,
    inc_a: np.ndarray,
    inc_b: np.ndarray,
    ka: np.ndarray,
    kb: np.ndarray,
    nmax: np.ndarray,
    nsum: np.ndarray,
    upper: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The crossing programs of :meth:`milp_partition.hetero.search._Triple.span_tables` (its numpy form is the
    definition) in C: (in_max, in_sum, lat_max, lat_sum), each (P + 1) x (L + 1); None when the extension is not
    available (or is an older build without it).  ``masks`` and ``ylb`` [k][c][s0][e], ``ymin`` [k][s0][e], ``inc_a``
    and ``inc_b`` [c][layer], ``ka`` and ``kb`` [k], ``nmax`` and ``nsum`` (P + 1) x (L + 1).  ``upper``: ``ylb`` and
    ``ymin`` are inf wherever e <= s0 (the search's are): the same values, with fewer entries read."""
    if not available() or not hasattr(_ext, "span_dp"):
        return None
    p, nk, l1, _l1 = ylb.shape
    outs = tuple(np.full((p + 1, l1), np.inf) for _ in range(4))
    f = np.float64
    _ext.span_dp(  # type: ignore[union-attr]
        np.ascontiguousarray(masks, dtype=np.uint8),
        np.ascontiguousarray(ylb, dtype=f),
        np.ascontiguousarray(ymin, dtype=f),
        np.ascontiguousarray(inc_a, dtype=f),
        np.ascontiguousarray(inc_b, dtype=f),
        np.ascontiguousarray(ka, dtype=f),
        np.ascontiguousarray(kb, dtype=f),
        np.ascontiguousarray(nmax, dtype=f),
        np.ascontiguousarray(nsum, dtype=f),
        *outs,
        p,
        nk,
        l1,
        bool(upper),
    )
    return outs[0], outs[1], outs[2], outs[3]


def tree_available() -> bool:
    """Whether :func:`tree_run` can run (the extension is built with it and not turned off)."""
    return available() and hasattr(_ext, "tree_run")


def tree_run(
    arrays: tuple[np.ndarray, ...],
    ints: tuple[int, ...],
    doubles: tuple[float, ...],
    callbacks: tuple[object, ...],
) -> tuple[int, int, int, int, int, int, float]:
    """The tree of one (mbs, D, P) from its root in C (:meth:`milp_partition.hetero.search._Triple.tree`, which states
    the arguments; :meth:`~milp_partition.hetero.search._Triple.rec` is the definition): (nodes, ticks, triple nodes,
    calls since the clock was read, stop, abort, incumbent) after it.  Only where :func:`tree_available`."""
    return _ext.tree_run(arrays, ints, doubles, callbacks)  # type: ignore[union-attr,no-any-return]
