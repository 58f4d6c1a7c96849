"""Least-squares fits of ``time = alpha + x * beta``, their quality, and held-out validation.

``x`` is FLOPs for matrix products, bytes for streaming kernels and copies, and the ring
volume ``2 (p - 1) / p * bytes`` for all-reduce.  Sizes span decades, so the fit minimises
*relative* residuals, ``sum(((alpha + x beta) - t) / t)^2``, and keeps ``alpha >= 0``.
Quality is reported as R^2 of the times and the largest relative residual; held-out points
(every ``holdout_every``-th size, never the first or the last) are left out of the fit and
predicted, and the median and largest relative prediction error are reported.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from milp_partition.errors import MilpPartitionError

#: Fewest points a fit needs (two coefficients plus one to judge them by).
MIN_FIT_POINTS = 3


class FitError(MilpPartitionError):
    """A fit cannot be made (too few points, or time does not grow with size)."""


@dataclass(frozen=True)
class LineFit:
    """One fitted series.

    Attributes
    ----------
    alpha, beta
        Intercept (seconds) and slope (seconds per unit of ``x``).
    r2, max_rel_residual
        Quality on the fitted points.
    n_points, n_holdout
        Points fitted and held out.
    holdout_median_rel_error, holdout_max_rel_error
        Relative prediction errors on the held-out points (None without any).
    held_out
        Per input point (in input order), whether it was held out.
    """

    alpha: float
    beta: float
    r2: float
    max_rel_residual: float
    n_points: int
    n_holdout: int
    holdout_median_rel_error: float | None
    holdout_max_rel_error: float | None
    held_out: tuple[bool, ...]

    def predict(self, x: np.ndarray | float) -> np.ndarray | float:
        return self.alpha + np.asarray(x, dtype=np.float64) * self.beta


def holdout_mask(n_points: int, every: int) -> np.ndarray:
    """Which of ``n_points`` sorted points to hold out: index ``i`` with ``i % every == 1``, not the last.

    None is held out when that would leave fewer than :data:`MIN_FIT_POINTS` to fit, or ``every < 2``.
    """
    mask = np.zeros(n_points, dtype=bool)
    if every < 2:
        return mask
    idx = np.arange(n_points)
    mask[(idx % every == 1) & (idx < n_points - 1)] = True
    if n_points - int(mask.sum()) < MIN_FIT_POINTS:
        mask[:] = False
    return mask


def least_squares(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """``(alpha, beta)`` minimising the relative residuals of ``alpha + x beta`` against ``t``, with ``alpha >= 0``.

    Raises
    ------
    FitError
        Fewer than two points, a non-positive time, or a slope that is not positive.
    """
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if len(x) < 2 or len(np.unique(x)) < 2:
        raise FitError(f"a line needs two distinct sizes, got {len(np.unique(x))}")
    if np.any(t <= 0) or not np.all(np.isfinite(t)):
        raise FitError("times must be positive and finite")
    scale = float(np.max(np.abs(x)))
    xs = x / scale
    w = 1.0 / t
    design = np.column_stack([w, w * xs])
    (alpha, beta_s), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha = 0.0
        beta_s = float(np.sum(w * w * xs * t) / np.sum(w * w * xs * xs))
    if not beta_s > 0:
        raise FitError("time does not grow with size (slope <= 0); the measurements are too noisy to fit")
    return float(alpha), float(beta_s / scale)


def quality(x: np.ndarray, t: np.ndarray, alpha: float, beta: float) -> tuple[float, float]:
    """``(R^2, largest relative residual)`` of ``alpha + x beta`` against ``t`` (R^2 is NaN for constant ``t``)."""
    pred = alpha + np.asarray(x, dtype=np.float64) * beta
    t = np.asarray(t, dtype=np.float64)
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - float(np.sum((t - pred) ** 2)) / ss_tot if ss_tot > 0 else math.nan
    return r2, float(np.max(np.abs(pred - t) / t))


def fit_line(x: np.ndarray, t: np.ndarray, holdout_every: int) -> LineFit:
    """Fit ``t = alpha + x beta`` on all but the held-out points and validate on those.

    Raises
    ------
    FitError
        Fewer than :data:`MIN_FIT_POINTS` points, or see :func:`least_squares`.
    """
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if len(x) < MIN_FIT_POINTS:
        raise FitError(f"{len(x)} points; a fit needs at least {MIN_FIT_POINTS}")
    order = np.argsort(x, kind="stable")
    mask_sorted = holdout_mask(len(x), holdout_every)
    held = np.zeros(len(x), dtype=bool)
    held[order] = mask_sorted
    alpha, beta = least_squares(x[~held], t[~held])
    r2, max_rel = quality(x[~held], t[~held], alpha, beta)
    med = mx = None
    if held.any():
        err = np.abs(alpha + x[held] * beta - t[held]) / t[held]
        med, mx = float(np.median(err)), float(np.max(err))
    return LineFit(alpha, beta, r2, max_rel, int((~held).sum()), int(held.sum()), med, mx, tuple(bool(h) for h in held))


@dataclass(frozen=True)
class PiecewiseFit:
    """A series fitted by regimes: piece ``k`` is ``t = alpha_k + x beta_k`` from ``starts[k]`` (its first fitted size) on.

    Attributes
    ----------
    starts, alphas, betas
        Per piece, ascending in ``starts`` (``starts[0]`` is 0: the first piece also covers smaller sizes).
    r2, max_rel_residual, n_points, n_holdout, holdout_median_rel_error, holdout_max_rel_error, held_out
        As in :class:`LineFit`, for the whole piecewise model.
    """

    starts: tuple[float, ...]
    alphas: tuple[float, ...]
    betas: tuple[float, ...]
    r2: float
    max_rel_residual: float
    n_points: int
    n_holdout: int
    holdout_median_rel_error: float | None
    holdout_max_rel_error: float | None
    held_out: tuple[bool, ...]

    def piece(self, x: float) -> int:
        """Index of the piece that covers size ``x``."""
        return max(0, int(np.searchsorted(np.asarray(self.starts), x, side="right")) - 1)

    def predict(self, x: np.ndarray | float) -> np.ndarray:
        xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
        k = np.maximum(np.searchsorted(np.asarray(self.starts), xs, side="right") - 1, 0)
        return np.asarray(self.alphas)[k] + xs * np.asarray(self.betas)[k]


#: Fewest fitted points per piece of a piecewise fit.
MIN_PIECE_POINTS = 3
#: Most pieces of a piecewise fit.
MAX_PIECES = 4
#: A further piece must cut the sum of squared relative residuals by at least this factor.
PIECE_GAIN = 0.7
#: No further piece once the RMS relative residual is below this (timing noise).
PIECE_GOOD_RMS = 0.01


def _rel_sse(x: np.ndarray, t: np.ndarray) -> tuple[float, float, float]:
    """``(sse, alpha, beta)`` of one line over the points (``inf`` when it cannot be fitted)."""
    try:
        alpha, beta = least_squares(x, t)
    except FitError:
        return math.inf, 0.0, 0.0
    return float(np.sum(((alpha + x * beta - t) / t) ** 2)), alpha, beta


def fit_piecewise(x: np.ndarray, t: np.ndarray, holdout_every: int, max_pieces: int = MAX_PIECES) -> PiecewiseFit:
    r"""Fit ``t`` by up to ``max_pieces`` alpha-beta regimes over contiguous size ranges (segmented least squares).

    The fitted points (held-out ones excluded, as in :func:`fit_line`), sorted by size, are cut into
    :math:`K` runs of at least :data:`MIN_PIECE_POINTS` points, each fitted by :func:`least_squares`;
    a dynamic program over the cut positions minimises the sum of squared relative residuals for
    each :math:`K`, and a further piece is taken only when it cuts that sum to :data:`PIECE_GAIN` of
    it or less, and the fit so far is not already within :data:`PIECE_GOOD_RMS` (RMS relative residual).  A regime starts at its first fitted size; a held-out point is predicted by the regime
    that covers it.

    Raises
    ------
    FitError
        Fewer than :data:`MIN_FIT_POINTS` points, or no line fits (see :func:`least_squares`).
    """
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if len(x) < MIN_FIT_POINTS:
        raise FitError(f"{len(x)} points; a fit needs at least {MIN_FIT_POINTS}")
    order = np.argsort(x, kind="stable")
    held = np.zeros(len(x), dtype=bool)
    held[order] = holdout_mask(len(x), holdout_every)
    fit_idx = order[~held[order]]
    fx, ft = x[fit_idx], t[fit_idx]
    n = len(fx)
    # seg[i][j]: one line over fitted points i..j-1
    seg: dict[tuple[int, int], tuple[float, float, float]] = {}
    for i in range(n):
        for j in range(i + MIN_PIECE_POINTS, n + 1):
            seg[i, j] = _rel_sse(fx[i:j], ft[i:j])
    # best[k][j]: least sse of the first j points in k pieces, with the cut that achieves it
    best: list[dict[int, tuple[float, int]]] = [{0: (0.0, -1)}]
    for k in range(1, max_pieces + 1):
        row: dict[int, tuple[float, int]] = {}
        for j in range(k * MIN_PIECE_POINTS, n + 1):
            cands = [
                (best[k - 1][i][0] + seg[i, j][0], i)
                for i in range((k - 1) * MIN_PIECE_POINTS, j - MIN_PIECE_POINTS + 1)
                if i in best[k - 1]
            ]
            if cands:
                row[j] = min(cands)
        best.append(row)
    pieces = 1
    if n not in best[1] or not math.isfinite(best[1][n][0]):
        alpha, beta = least_squares(fx, ft)  # raises the reason
    for k in range(2, max_pieces + 1):
        if best[pieces][n][0] <= n * PIECE_GOOD_RMS**2:
            break  # already within measurement noise: no further piece
        if n in best[k] and best[k][n][0] <= PIECE_GAIN * best[pieces][n][0]:
            pieces = k
    cuts = [n]
    for k in range(pieces, 0, -1):
        cuts.append(best[k][cuts[-1]][1])
    cuts.reverse()  # 0 = c_0 < c_1 < ... < c_K = n
    starts, alphas, betas = [], [], []
    for a, b in itertools.pairwise(cuts):
        _, alpha, beta = seg[a, b]
        starts.append(0.0 if a == 0 else float(fx[a]))
        alphas.append(alpha)
        betas.append(beta)
    model = PiecewiseFit(tuple(starts), tuple(alphas), tuple(betas), math.nan, math.nan, n, int(held.sum()), None, None, ())
    pred = model.predict(fx)
    ss_tot = float(np.sum((ft - ft.mean()) ** 2))
    r2 = 1.0 - float(np.sum((ft - pred) ** 2)) / ss_tot if ss_tot > 0 else math.nan
    med = mx = None
    if held.any():
        err = np.abs(model.predict(x[held]) - t[held]) / t[held]
        med, mx = float(np.median(err)), float(np.max(err))
    return PiecewiseFit(
        tuple(starts),
        tuple(alphas),
        tuple(betas),
        r2,
        float(np.max(np.abs(pred - ft) / ft)),
        n,
        int(held.sum()),
        med,
        mx,
        tuple(bool(h) for h in held),
    )
