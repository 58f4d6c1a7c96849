"""The benchmark kernels over an array module ``xp`` and the checks that guard them.

Every kernel is a plain function of ``xp`` and its buffers, so NumPy and CuPy run the same
code.  The suite looks kernels up on this module at call time (``kernels.gemm(...)``), and
checks each one's result against a reference computed in float64 on the host before it
times it: a wrong kernel raises :class:`KernelCheckError` and calibrates nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from milp_partition.errors import MilpPartitionError


class KernelCheckError(MilpPartitionError):
    """A benchmark kernel returned a wrong result; its timings would calibrate nothing."""


# ----------------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------------


def gemm(xp: Any, a: Any, b: Any, out: Any) -> Any:
    """``out = a @ b``."""
    return xp.matmul(a, b, out=out)


def copy(xp: Any, src: Any, dst: Any) -> Any:
    """``dst[:] = src``: reads and writes ``src.nbytes`` bytes each."""
    xp.copyto(dst, src)
    return dst


def scale_add(xp: Any, x: Any, y: Any, out: Any, alpha: float) -> Any:
    """``out = alpha * x + y`` (two element-wise passes, the same on every back-end)."""
    xp.multiply(x, alpha, out=out)
    xp.add(out, y, out=out)
    return out


def empty(xp: Any, x: Any, out: Any) -> Any:
    """``out = x + 1`` on a one-element array: an almost-empty kernel."""
    return xp.add(x, 1, out=out)


def reduction(xp: Any, x: Any) -> Any:
    """``sum(x)`` (a 0-d array on the device)."""
    return xp.sum(x)


# ----------------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------------


def unit_roundoff(dtype: Any) -> float:
    """Machine epsilon of ``dtype`` (bfloat16 where NumPy does not know it: 2^-7)."""
    try:
        return float(np.finfo(dtype).eps)
    except (TypeError, ValueError):
        return 2.0**-7


def check_gemm(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: Any, tolerance_factor: float, rng: np.random.Generator
) -> float:
    """Freivalds' check of ``c == a @ b``; returns the relative error, raises if above tolerance.

    With a random vector ``x`` the float64 reference ``a @ (b @ x)`` costs O(n^2).  For
    zero-mean inputs a correct product's relative error is about ``eps * sqrt(n)``; the check
    allows ``tolerance_factor`` times that (plus ``eps`` for rounding the result).
    """
    a64, b64, c64 = (np.asarray(m, dtype=np.float64) for m in (a, b, c))
    x = rng.standard_normal(b64.shape[1])
    ref = a64 @ (b64 @ x)
    err = float(np.linalg.norm(c64 @ x - ref) / max(np.linalg.norm(ref), np.finfo(np.float64).tiny))
    n = a64.shape[1]
    tol = tolerance_factor * unit_roundoff(dtype) * (math.sqrt(n) + 1.0)
    if not math.isfinite(err) or err > tol:
        raise KernelCheckError(
            f"gemm {np.dtype(c.dtype).name if hasattr(c, 'dtype') else dtype} n={n}: relative error {err:.3g} > {tol:.3g}"
        )
    return err


def check_equal(what: str, got: np.ndarray, expected: np.ndarray) -> None:
    """Raise unless ``got`` equals ``expected`` exactly (copies)."""
    if got.shape != expected.shape or not np.array_equal(got, expected):
        raise KernelCheckError(f"{what}: the copy differs from its source")


def check_close(what: str, got: np.ndarray, expected: np.ndarray, dtype: Any, tolerance_factor: float, terms: int = 1) -> float:
    """Raise unless ``got`` is close to the float64 ``expected``; returns the largest relative error."""
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    scale = np.maximum(np.abs(e), 1.0)
    err = float(np.max(np.abs(g - e) / scale)) if e.size else 0.0
    tol = tolerance_factor * unit_roundoff(dtype) * max(1.0, math.sqrt(terms))
    if g.shape != e.shape or not math.isfinite(err) or err > tol:
        raise KernelCheckError(f"{what}: relative error {err:.3g} > {tol:.3g}")
    return err
