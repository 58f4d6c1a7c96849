"""Settings of the microbenchmark suite, and the presets ``quick``, ``full`` and ``tiny`` per back-end."""

from __future__ import annotations

from dataclasses import dataclass, field

_KIB = 2**10
_MIB = 2**20
_GIB = 2**30


def _geometric(first: int, last: int, factor: int) -> tuple[int, ...]:
    sizes = [first]
    while sizes[-1] * factor <= last:
        sizes.append(sizes[-1] * factor)
    return tuple(sizes)


@dataclass(frozen=True)
class TimingSettings:
    """How one benchmark point is timed.

    Attributes
    ----------
    warmup
        Untimed runs first (library loading, caches, GPU clocks).
    repeats
        Timed samples; the measurement is their median.
    min_sample_time_s
        A sample repeats the operation (on rotating buffers) until it lasts at least this long,
        so timer resolution and per-call noise do not dominate tiny operations.
    max_inner
        Most operations per sample.
    cpu_clock
        Clock of the NumPy back-end: ``"thread"`` times the CPU time of the calling thread
        (``time.thread_time``), which on a shared machine leaves out the time slices other processes
        take (wall time there is bimodal: +4 ms whenever the scheduler switches away); it needs BLAS
        limited to one thread, otherwise the suite falls back to ``"wall"`` (``time.perf_counter``).
        GPUs always use CUDA events.
    """

    warmup: int = 1
    repeats: int = 5
    min_sample_time_s: float = 2e-3
    max_inner: int = 10_000
    cpu_clock: str = "thread"


@dataclass(frozen=True)
class SuiteSettings:
    """What the suite measures.

    Attributes
    ----------
    preset
        Name of the preset these settings came from (recorded in the profile).
    gemm_sizes
        Orders n of the square matrix products (2 n^3 FLOPs each).
    gemm_dtypes
        Data types of the products; those the back-end lacks are skipped with a note.
    cpu_half_precision_max_size
        NumPy's float16 matmul has no BLAS path (about 1 GFLOP/s): larger orders are skipped on NumPy.
    stream_sizes_bytes
        Array sizes of the copy, scale-add and reduction kernels, from cache-resident to far beyond.
    transfer_sizes_bytes
        Message sizes of host-to-device, device-to-host and device-to-device copies.
    allreduce_sizes_bytes
        Message sizes of the all-reduce (only with 2 or more GPUs and NCCL).
    timing
        How each point is timed.
    rotation_buffers
        Buffers each operand rotates among between runs, so a run does not find the last run's data in cache.
    rotation_max_bytes
        Cap on the bytes of one operand's rotated buffers together (large sizes use fewer buffers; they exceed caches anyway).
    stream_kernels
        Which of ``copy``, ``scale_add`` and ``reduction`` to run (``copy`` is required: it is the memory fit).
    stream_fit_min_bytes
        Streaming and reduction fits use array sizes from this up; smaller (cache-resident) points are
        kept as raw measurements but not fitted (on a CPU their bandwidth is the cache's, not memory's).
    transfer_fit_min_bytes
        Copy (h2d, d2h, d2d) fits use messages from this size up.  On the NumPy back-end these are
        memcpy between host buffers, with the same cache knee as the streaming kernels; on a GPU
        (PCIe, NVLink) every size is fitted, so that alpha is the link's latency.
    cpu_blas_threads
        BLAS threads for the NumPy back-end (one: the tool's CPU devices are single cores, and one thread
        stays steady on a shared machine); None leaves the library's default.
    holdout_every
        Every this many points of a series (never the first or last) is held out of its fit and predicted.
    check_tolerance_factor
        Allowed error of a kernel against its float64 reference, in units of ``eps * sqrt(terms)``.
    check_max_elements
        Element-wise checks of larger arrays compare a random sample of this many elements with the
        reference (copies are always compared whole, reductions always summed whole).
    seed
        Seed of the random inputs.
    """

    preset: str
    gemm_sizes: tuple[int, ...]
    stream_sizes_bytes: tuple[int, ...]
    transfer_sizes_bytes: tuple[int, ...]
    allreduce_sizes_bytes: tuple[int, ...]
    timing: TimingSettings = field(default_factory=TimingSettings)
    gemm_dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    cpu_half_precision_max_size: int = 128
    rotation_buffers: int = 3
    rotation_max_bytes: int = 256 * _MIB
    stream_kernels: tuple[str, ...] = ("copy", "scale_add", "reduction")
    stream_fit_min_bytes: int = 0
    transfer_fit_min_bytes: int = 0
    cpu_blas_threads: int | None = 1
    holdout_every: int = 3
    check_tolerance_factor: float = 8.0
    check_max_elements: int = 1 << 22
    seed: int = 0


def preset(name: str, backend: str) -> SuiteSettings:
    """The settings of preset ``name`` (``quick``, ``full``, ``tiny``) for back-end ``backend`` (``numpy``, ``cupy``)."""
    gpu = backend == "cupy"
    # On the CPU here, copies of arrays under about 8 MiB run at cache speed (2-4x memory's); a GPU's small
    # kernels are latency-bound, which the fit's alpha covers.
    stream_fit_min_bytes = 0 if gpu else 8 * _MIB
    if name == "tiny":
        # On a GPU every kernel and copy takes the launch latency (about 10 us) up to a few MiB: the tiny sizes of a
        # CPU would fit nothing but overhead there, so the GPU's tiny grid reaches sizes that take well over it.
        return SuiteSettings(
            preset="tiny",
            gemm_sizes=(256, 512, 1024, 2048, 4096) if gpu else (16, 32, 48, 64, 96),
            stream_sizes_bytes=_geometric(1 * _MIB, 1 * _GIB, 4) if gpu else _geometric(4 * _KIB, 1 * _MIB, 4),
            transfer_sizes_bytes=_geometric(64, 1 * _GIB, 8) if gpu else _geometric(64, 1 * _MIB, 8),
            allreduce_sizes_bytes=_geometric(4 * _KIB, 4 * _MIB, 8),
            timing=TimingSettings(warmup=1, repeats=3, min_sample_time_s=2e-4, max_inner=200),
            cpu_half_precision_max_size=48,
            stream_fit_min_bytes=0,
        )
    if name == "quick":
        return SuiteSettings(
            preset="quick",
            gemm_sizes=(256, 512, 768, 1024, 1536, 2048, 3072, 4096)
            if gpu
            else (32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024),
            stream_sizes_bytes=_geometric(4 * _KIB, 4 * _MIB, 2) + tuple(k * _MIB for k in (6, 8, 12, 16, 24, 32, 48, 64)),
            transfer_sizes_bytes=_geometric(8, 64 * _MIB, 4)
            if gpu
            else _geometric(8, 4 * _MIB, 4) + tuple(k * _MIB for k in (6, 8, 12, 16, 24, 32, 48, 64)),
            allreduce_sizes_bytes=_geometric(4 * _KIB, 64 * _MIB, 4),
            timing=TimingSettings(warmup=2 if gpu else 1, repeats=7, min_sample_time_s=1e-3),
            stream_fit_min_bytes=stream_fit_min_bytes,
            transfer_fit_min_bytes=stream_fit_min_bytes,
        )
    if name == "full":
        return SuiteSettings(
            preset="full",
            gemm_sizes=(128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
            if gpu
            else (32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048),
            stream_sizes_bytes=_geometric(4 * _KIB, 1 * _GIB, 2),
            transfer_sizes_bytes=_geometric(8, 256 * _MIB, 2),
            allreduce_sizes_bytes=_geometric(4 * _KIB, 256 * _MIB, 2),
            timing=TimingSettings(warmup=3 if gpu else 1, repeats=7, min_sample_time_s=5e-3),
            cpu_half_precision_max_size=256,
            stream_fit_min_bytes=stream_fit_min_bytes,
            transfer_fit_min_bytes=stream_fit_min_bytes,
        )
    raise ValueError(f"unknown preset {name!r}; expected quick, full or tiny")
