"""Array back-ends for the microbenchmark suite: NumPy on the CPU, CuPy on NVIDIA GPUs.

The suite's kernels run on ``backend.xp`` (the array module) and so share one code path.
What differs between a CPU and a GPU -- timing (``perf_counter`` against CUDA events),
host/device copies, peer copies, NCCL all-reduce, versions -- lives behind the small
interface of :class:`ArrayBackend` here.  Nothing imports CuPy unless the CuPy back-end is
asked for.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from milp_partition.calibration.kernels import KernelCheckError
from milp_partition.errors import InputError

BACKEND_CHOICES: tuple[str, ...] = ("auto", "cupy", "numpy")


class BackendUnavailableError(InputError):
    """The requested array back-end cannot run here (e.g. ``cupy`` without CuPy or a GPU)."""


class ArrayBackend:
    """What the suite needs from a device besides its array module.

    Attributes
    ----------
    name
        ``"numpy"`` or ``"cupy"``.
    xp
        The array module the kernels run on.
    device_name
        The device's name as the driver (or the host) reports it.
    memory_bytes
        Device memory in bytes, None if unknown.
    device_count
        Devices visible (1 for NumPy).
    """

    name: str = ""
    xp: Any = None
    device_name: str = ""
    memory_bytes: int | None = None
    device_count: int = 1

    def synchronize(self) -> None:
        """Wait until queued work is done."""

    def time_block(self, fn: Callable[[], object], cpu_clock: str = "wall") -> float:
        """Seconds that ``fn()`` takes on the device (``cpu_clock``: see :class:`TimingSettings`)."""
        raise NotImplementedError

    def to_host(self, a: Any) -> np.ndarray:
        """A NumPy copy of device array ``a``."""
        raise NotImplementedError

    def host_buffer(self, nbytes: int) -> np.ndarray:
        """A host buffer of ``nbytes`` bytes (pinned where the back-end has pinned memory)."""
        return np.empty(nbytes, dtype=np.uint8)

    def device_buffer(self, nbytes: int, device: int = 0) -> Any:
        """A device buffer of ``nbytes`` bytes on ``device``."""
        raise NotImplementedError

    def h2d(self, dst: Any, src: np.ndarray) -> None:
        """Copy host buffer ``src`` into device buffer ``dst``."""
        raise NotImplementedError

    def d2h(self, dst: np.ndarray, src: Any) -> None:
        """Copy device buffer ``src`` into host buffer ``dst``."""
        raise NotImplementedError

    def d2d(self, dst: Any, src: Any) -> None:
        """Copy device buffer ``src`` into device buffer ``dst`` (possibly on another device)."""
        raise NotImplementedError

    def device_pairs(self) -> list[tuple[int, int]]:
        """Ordered pairs of distinct devices to copy between (empty with one device)."""
        return []

    def transfer_notes(self) -> dict[str, str]:
        """What ``h2d``, ``d2h`` and ``d2d`` actually measure here."""
        raise NotImplementedError

    def allreduce_runner(self, count: int) -> Callable[[], object] | None:
        """A function running one float32 all-reduce of ``count`` elements over every device, or None."""
        return None

    def versions(self) -> dict[str, str]:
        """Library, driver and runtime versions and the host."""
        return {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "processor": _cpu_model(),
            "cpu_count": str(os.cpu_count()),
        }

    def dtype(self, name: str) -> Any:
        """The array module's data type called ``name``."""
        return self.xp.dtype(name)

    def dtype_problem(self, dtype: str) -> str | None:
        """None when matrix products in ``dtype`` run here, else why not (a phrase)."""
        if not hasattr(self.xp, dtype):
            return f"the {self.name} array module has no {dtype} dtype"
        return None


class NumpyBackend(ArrayBackend):
    """The CPU: NumPy arrays, wall-clock timing, host memcpy standing in for device copies."""

    name = "numpy"
    xp = np

    def __init__(self) -> None:
        self.device_name = f"CPU {_cpu_model()} ({os.cpu_count()} logical cores, NumPy)"
        self.memory_bytes = _host_memory_bytes()

    def time_block(self, fn: Callable[[], object], cpu_clock: str = "wall") -> float:
        clock = {"thread": time.thread_time, "wall": time.perf_counter}[cpu_clock]
        t0 = clock()
        fn()
        return clock() - t0

    def to_host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def device_buffer(self, nbytes: int, device: int = 0) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def h2d(self, dst: Any, src: np.ndarray) -> None:
        np.copyto(dst, src)

    def d2h(self, dst: np.ndarray, src: Any) -> None:
        np.copyto(dst, src)

    def d2d(self, dst: Any, src: Any) -> None:
        np.copyto(dst, src)

    def transfer_notes(self) -> dict[str, str]:
        note = "memcpy between two host buffers (NumPy back-end: there is no device)"
        return {"h2d": note, "d2h": note, "d2d": note}


class CupyBackend(ArrayBackend):
    """An NVIDIA GPU through CuPy: CUDA-event timing, pinned host buffers, peer copies, NCCL."""

    name = "cupy"

    def __init__(self, cupy: Any) -> None:
        self.xp = cupy
        self._cp = cupy
        runtime = cupy.cuda.runtime
        self.device_count = runtime.getDeviceCount()
        props = runtime.getDeviceProperties(0)
        raw_name = props["name"]
        self.device_name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        self.memory_bytes = int(props["totalGlobalMem"])
        self._peer_enabled: set[tuple[int, int]] = set()
        self._nccl_comms: list[Any] | None = None

    def synchronize(self) -> None:
        for d in range(self.device_count):
            with self._cp.cuda.Device(d):
                self._cp.cuda.Device(d).synchronize()

    def time_block(self, fn: Callable[[], object], cpu_clock: str = "wall") -> float:
        cp = self._cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3

    def to_host(self, a: Any) -> np.ndarray:
        return self._cp.asnumpy(a)

    def host_buffer(self, nbytes: int) -> np.ndarray:
        import cupyx

        return cupyx.empty_pinned((nbytes,), dtype=np.uint8)

    def device_buffer(self, nbytes: int, device: int = 0) -> Any:
        with self._cp.cuda.Device(device):
            return self._cp.empty(nbytes, dtype=np.uint8)

    def h2d(self, dst: Any, src: np.ndarray) -> None:
        dst.set(src)

    def d2h(self, dst: np.ndarray, src: Any) -> None:
        src.get(out=dst)

    def d2d(self, dst: Any, src: Any) -> None:
        runtime = self._cp.cuda.runtime
        if dst.device.id == src.device.id:
            dst.data.copy_from_device(src.data, src.nbytes)
        else:
            runtime.memcpyPeer(dst.data.ptr, dst.device.id, src.data.ptr, src.device.id, src.nbytes)

    def device_pairs(self) -> list[tuple[int, int]]:
        runtime = self._cp.cuda.runtime
        pairs = [(i, j) for i in range(self.device_count) for j in range(self.device_count) if i != j]
        for i, j in pairs:
            if (i, j) not in self._peer_enabled and runtime.deviceCanAccessPeer(i, j):
                with self._cp.cuda.Device(i):
                    try:
                        runtime.deviceEnablePeerAccess(j)
                    except runtime.CUDARuntimeError:  # already enabled
                        pass
                self._peer_enabled.add((i, j))
        return pairs

    def transfer_notes(self) -> dict[str, str]:
        d2d = (
            "peer copies between every ordered GPU pair (peer access where available); the slowest pair"
            if self.device_count > 1
            else "device-local copy on the one GPU (no peer to copy to)"
        )
        return {"h2d": "pinned host to GPU 0", "d2h": "GPU 0 to pinned host", "d2d": d2d}

    def allreduce_runner(self, count: int) -> Callable[[], object] | None:
        if self.device_count < 2:
            return None
        try:
            from cupy.cuda import nccl
        except ImportError:
            return None
        if not getattr(nccl, "available", True):
            return None
        cp = self._cp
        devices = list(range(self.device_count))
        if self._nccl_comms is None:  # one communicator per GPU, made once and reused for every size
            self._nccl_comms = nccl.NcclCommunicator.initAll(devices)
        comms = self._nccl_comms
        bufs = []
        for d in devices:
            with cp.cuda.Device(d):
                bufs.append((cp.ones(count, dtype=cp.float32), cp.empty(count, dtype=cp.float32)))

        def run() -> object:
            nccl.groupStart()
            for d, comm in zip(devices, comms):
                with cp.cuda.Device(d):
                    send, recv = bufs[d]
                    comm.allReduce(send.data.ptr, recv.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, cp.cuda.Stream.null.ptr)
            nccl.groupEnd()
            return bufs

        run.check = lambda: _check_allreduce(cp, bufs, len(devices))  # type: ignore[attr-defined]
        return run

    def versions(self) -> dict[str, str]:
        cp = self._cp
        v = super().versions()
        runtime = cp.cuda.runtime
        v["cupy"] = cp.__version__
        v["cuda_driver"] = str(runtime.driverGetVersion())
        v["cuda_runtime"] = str(runtime.runtimeGetVersion())
        v["gpu_count"] = str(self.device_count)
        try:
            from cupy.cuda import nccl

            v["nccl"] = str(nccl.get_version())
        except Exception:
            v["nccl"] = "unavailable"
        return v

    def dtype(self, name: str) -> Any:
        if name == "bfloat16" and not hasattr(self.xp, "bfloat16"):
            import ml_dtypes  # CuPy has no bfloat16 of its own; it takes NumPy's extension type

            return np.dtype(ml_dtypes.bfloat16)
        return super().dtype(name)

    def dtype_problem(self, dtype: str) -> str | None:
        """None when a 2 x 2 product of ones in ``dtype`` gives 2 on the GPU, else why not."""
        try:
            dt = self.dtype(dtype)
        except Exception as exc:
            return f"no {dtype} dtype here ({type(exc).__name__}: {exc})"
        try:
            ones = self.xp.ones((2, 2), dtype=self.xp.float32).astype(dt)
            got = float(self._cp.asnumpy(self.xp.matmul(ones, ones).astype(self.xp.float32))[0, 0])
        except Exception as exc:
            return f"cupy cannot multiply {dtype} matrices ({type(exc).__name__}: {str(exc)[:120]})"
        if got != 2.0:
            return f"a {dtype} product of ones gave {got}, not 2"
        return None


def _check_allreduce(cp: Any, bufs: list[tuple[Any, Any]], p: int) -> None:

    for d, (_, recv) in enumerate(bufs):
        with cp.cuda.Device(d):
            got = cp.asnumpy(recv)
        if not np.allclose(got, float(p)):
            raise KernelCheckError(f"all-reduce on GPU {d}: expected every element {p}, got {got[:4]}...")


def _cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def cupy_unavailable_reason() -> str | None:
    """None when CuPy imports and sees a GPU, else why not (one line)."""
    try:
        import cupy
    except Exception as exc:
        return f"cupy does not import ({type(exc).__name__}: {exc}); install it with pip install 'milp-partition[gpu]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"cupy imports but finds no usable GPU ({type(exc).__name__}: {exc})"
    if count < 1:
        return "cupy imports but finds no GPU"
    return None


def select_backend(choice: str = "auto") -> ArrayBackend:
    """The back-end for ``choice``: ``auto`` (CuPy with a GPU, else NumPy), ``cupy`` or ``numpy``.

    Raises
    ------
    BackendUnavailableError
        ``cupy`` was asked for without CuPy or a GPU.
    """
    if choice not in BACKEND_CHOICES:
        raise InputError(f"unknown backend {choice!r}; choose one of {', '.join(BACKEND_CHOICES)}", where="--backend")
    if choice == "numpy":
        return NumpyBackend()
    reason = cupy_unavailable_reason()
    if reason is None:
        import cupy

        return CupyBackend(cupy)
    if choice == "cupy":
        raise BackendUnavailableError(f"the cupy backend cannot run here: {reason}", where="--backend cupy")
    return NumpyBackend()
