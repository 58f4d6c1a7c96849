"""Limiting NumPy's BLAS to a number of threads while the CPU suite runs.

On the CPU the tool's devices are single cores (``host_cpu_cores``), and a multi-threaded
BLAS on a shared machine times other people's load more than its own work; so the NumPy
back-end calibrates with one BLAS thread by default.  ``threadpoolctl`` is used when it is
installed; otherwise the OpenBLAS bundled with NumPy is called through ``ctypes``.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from pathlib import Path

#: OpenBLAS entry points, newest naming first (NumPy 2 wheels bundle ``scipy_openblas64_``).
_SETTERS: tuple[str, ...] = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS: tuple[str, ...] = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


def _openblas() -> tuple[ctypes.CDLL, str, str] | None:
    import numpy as np

    root = Path(np.__file__).parent
    for folder in (root.parent / "numpy.libs", root / ".libs", root / ".dylibs"):
        for lib in sorted(folder.glob("*openblas*")) if folder.is_dir() else []:
            try:
                handle = ctypes.CDLL(str(lib))
            except OSError:
                continue
            for setter, getter in zip(_SETTERS, _GETTERS):
                if hasattr(handle, setter) and hasattr(handle, getter):
                    return handle, setter, getter
    return None


@contextlib.contextmanager
def limit_blas_threads(threads: int | None) -> Iterator[tuple[bool, str]]:
    """Run the body with at most ``threads`` BLAS threads; yields (whether the limit holds, a line saying what was done).

    ``None`` leaves the library alone.  When neither ``threadpoolctl`` nor a known OpenBLAS is
    found, nothing changes and the line says so.
    """
    if threads is None:
        yield False, "BLAS threads: library default"
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield True, f"BLAS threads: {threads} (threadpoolctl)"
        return
    found = _openblas()
    if found is None:
        yield False, f"BLAS threads: library default (could not limit to {threads}: no threadpoolctl, no known OpenBLAS)"
        return
    handle, setter, getter = found
    before = int(getattr(handle, getter)())
    getattr(handle, setter)(ctypes.c_int(threads))
    try:
        yield True, f"BLAS threads: {threads} (OpenBLAS, default {before})"
    finally:
        getattr(handle, setter)(ctypes.c_int(before))
