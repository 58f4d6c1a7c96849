"""Device profiles from vendor datasheets (V100, A100, H100, H200), marked ``source="datasheet"``.

The peak numbers are NVIDIA's published datasheet figures (dense, i.e. without the 2:4
sparsity factor), taken from these documents:

* V100: "NVIDIA Tesla V100 GPU Accelerator" datasheet, SXM2 32 GB variant -- FP32 15.7 TFLOP/s,
  Tensor (FP16) 125 TFLOP/s, HBM2 900 GB/s, NVLink 300 GB/s, PCIe (gen3) 32 GB/s.
* A100: "NVIDIA A100 Tensor Core GPU" datasheet, SXM 80 GB -- FP32 19.5 TFLOP/s, TF32 156,
  BF16/FP16 312 TFLOP/s, HBM2e 2,039 GB/s, NVLink 600 GB/s, PCIe gen4 64 GB/s.
* H100: "NVIDIA H100 Tensor Core GPU" datasheet, SXM 80 GB -- FP32 67 TFLOP/s, TF32 494.5 (989 with
  sparsity), BF16/FP16 989.5 TFLOP/s (1,979 with sparsity), HBM3 3.35 TB/s, NVLink 900 GB/s, PCIe gen5 128 GB/s.
* H200: "NVIDIA H200 Tensor Core GPU" datasheet, SXM 141 GB -- the H100 SXM's compute figures,
  HBM3e 4.8 TB/s, NVLink 900 GB/s, PCIe gen5 128 GB/s.

NVIDIA's NVLink and PCIe figures are totals over both directions; one direction gets half
(V100 NVLink 150 GB/s, A100 300, H100/H200 450; PCIe gen3/4/5 x16 16/32/64 GB/s theoretical).
Memory capacity is the datasheet's "GB" figure times 10^9 bytes (a slight under-estimate of
the usable capacity when the vendor means GiB).

Nothing here is measured.  What a real kernel achieves is an *assumption*, one field of
:class:`DatasheetAssumptions`, and every profile built here lists its assumptions in
``DeviceProfile.assumptions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from milp_partition.calibration.profile import AlphaBeta, ComputeRate, DeviceProfile
from milp_partition.errors import InputError

_TERA = 1e12
_GIGA = 1e9


@dataclass(frozen=True)
class Datasheet:
    """One GPU's vendor figures.

    Attributes
    ----------
    name
        Profile name, e.g. ``"H100-SXM (datasheet)"``.
    document
        The datasheet the figures come from.
    memory_bytes
        Memory capacity in bytes.
    peak_flop_per_s
        Dense peak FLOP/s per dtype (``float32`` = non-tensor FP32; ``tf32``, ``float16``, ``bfloat16`` = tensor cores).
    memory_bandwidth_bytes_per_s
        Peak device-memory bandwidth.
    nvlink_bytes_per_s_per_direction
        NVLink bandwidth to peer GPUs, one direction (half the datasheet's total).
    pcie_bytes_per_s_per_direction
        Host link bandwidth, one direction (half the datasheet's total).
    """

    name: str
    document: str
    memory_bytes: int
    peak_flop_per_s: Mapping[str, float]
    memory_bandwidth_bytes_per_s: float
    nvlink_bytes_per_s_per_direction: float
    pcie_bytes_per_s_per_direction: float


@dataclass(frozen=True)
class DatasheetAssumptions:
    """What real kernels are assumed to reach on a datasheet device (assumptions, not measurements).

    Attributes
    ----------
    compute_efficiency
        Fraction of dense peak FLOP/s that large matrix products reach.
    compute_overhead_s
        Fixed time per matrix product (half of the assumed peak is reached at ``overhead * peak`` FLOPs).
    memory_efficiency
        Fraction of peak memory bandwidth that streaming kernels reach.
    memory_overhead_s
        Fixed time per streaming kernel.
    launch_latency_s
        Time of an almost-empty kernel.
    link_efficiency
        Fraction of the per-direction NVLink / PCIe bandwidth that copies reach.
    link_latency_s
        Fixed time per copy (alpha of h2d, d2h, d2d).
    allreduce_step_latency_s
        Latency of one ring step of an NCCL all-reduce (alpha of the ring model).
    """

    compute_efficiency: float = 0.7
    compute_overhead_s: float = 10e-6
    memory_efficiency: float = 0.8
    memory_overhead_s: float = 5e-6
    launch_latency_s: float = 5e-6
    link_efficiency: float = 0.8
    link_latency_s: float = 10e-6
    allreduce_step_latency_s: float = 10e-6

    def describe(self) -> tuple[str, ...]:
        """The assumptions as sentences, for ``DeviceProfile.assumptions``."""
        return (
            f"large matrix products reach {self.compute_efficiency:.0%} of the dense datasheet peak, "
            f"with a fixed {self.compute_overhead_s * 1e6:g} us per product",
            f"streaming kernels reach {self.memory_efficiency:.0%} of the datasheet memory bandwidth, "
            f"with a fixed {self.memory_overhead_s * 1e6:g} us per kernel",
            f"an almost-empty kernel takes {self.launch_latency_s * 1e6:g} us",
            f"copies reach {self.link_efficiency:.0%} of one direction of NVLink (d2d) or PCIe (h2d, d2h), "
            f"plus {self.link_latency_s * 1e6:g} us each",
            f"ring all-reduce runs over NVLink at that copy bandwidth, {self.allreduce_step_latency_s * 1e6:g} us per ring step",
        )


def _sheet(
    name: str,
    document: str,
    memory_gb: float,
    peaks_tflop_per_s: Mapping[str, float],
    memory_gb_per_s: float,
    nvlink_total_gb_per_s: float,
    pcie_total_gb_per_s: float,
) -> Datasheet:
    return Datasheet(
        name=name,
        document=document,
        memory_bytes=int(memory_gb * _GIGA),
        peak_flop_per_s=MappingProxyType({k: v * _TERA for k, v in peaks_tflop_per_s.items()}),
        memory_bandwidth_bytes_per_s=memory_gb_per_s * _GIGA,
        nvlink_bytes_per_s_per_direction=nvlink_total_gb_per_s * _GIGA / 2,
        pcie_bytes_per_s_per_direction=pcie_total_gb_per_s * _GIGA / 2,
    )


#: The datasheets by upper-case short name.
DATASHEETS: Mapping[str, Datasheet] = MappingProxyType(
    {
        "V100": _sheet(
            "V100-SXM2-32GB (datasheet)",
            "NVIDIA Tesla V100 GPU Accelerator datasheet (SXM2)",
            32,
            {"float32": 15.7, "float16": 125.0},
            900,
            300,
            32,
        ),
        "A100": _sheet(
            "A100-SXM-80GB (datasheet)",
            "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB)",
            80,
            {"float32": 19.5, "tf32": 156.0, "float16": 312.0, "bfloat16": 312.0},
            2039,
            600,
            64,
        ),
        "H100": _sheet(
            "H100-SXM-80GB (datasheet)",
            "NVIDIA H100 Tensor Core GPU datasheet (SXM)",
            80,
            {"float32": 67.0, "tf32": 494.5, "float16": 989.5, "bfloat16": 989.5},
            3350,
            900,
            128,
        ),
        "H200": _sheet(
            "H200-SXM-141GB (datasheet)",
            "NVIDIA H200 Tensor Core GPU datasheet (SXM)",
            141,
            {"float32": 67.0, "tf32": 494.5, "float16": 989.5, "bfloat16": 989.5},
            4800,
            900,
            128,
        ),
    }
)


def build_datasheet_profile(name: str, assumptions: DatasheetAssumptions | None = None) -> DeviceProfile:
    """The :class:`DeviceProfile` of datasheet ``name`` (case-insensitive) under ``assumptions``."""
    key = name.strip().upper()
    if key not in DATASHEETS:
        raise InputError(f"unknown datasheet device {name!r}; known: {', '.join(DATASHEETS)}", where="profile")
    sheet = DATASHEETS[key]
    a = assumptions or DatasheetAssumptions()
    nvlink_beta = 1.0 / (sheet.nvlink_bytes_per_s_per_direction * a.link_efficiency)
    pcie_beta = 1.0 / (sheet.pcie_bytes_per_s_per_direction * a.link_efficiency)
    pcie_note = f"PCIe, {sheet.pcie_bytes_per_s_per_direction / _GIGA:g} GB/s per direction x {a.link_efficiency:g} (assumed)"
    return DeviceProfile(
        name=sheet.name,
        source="datasheet",
        backend="datasheet",
        memory_bytes=sheet.memory_bytes,
        launch_latency_s=a.launch_latency_s,
        compute={
            dtype: ComputeRate(peak_flop_per_s=peak * a.compute_efficiency, overhead_s=a.compute_overhead_s)
            for dtype, peak in sheet.peak_flop_per_s.items()
        },
        memory=AlphaBeta(
            a.memory_overhead_s,
            1.0 / (sheet.memory_bandwidth_bytes_per_s * a.memory_efficiency),
            f"HBM {sheet.memory_bandwidth_bytes_per_s / _GIGA:g} GB/s x {a.memory_efficiency:g} (assumed)",
        ),
        links={
            "h2d": AlphaBeta(a.link_latency_s, pcie_beta, pcie_note),
            "d2h": AlphaBeta(a.link_latency_s, pcie_beta, pcie_note),
            "d2d": AlphaBeta(
                a.link_latency_s,
                nvlink_beta,
                f"NVLink, {sheet.nvlink_bytes_per_s_per_direction / _GIGA:g} GB/s per direction x {a.link_efficiency:g} (assumed)",
            ),
        },
        allreduce=AlphaBeta(a.allreduce_step_latency_s, nvlink_beta, "ring over NVLink (assumed)"),
        versions={"datasheet": sheet.document},
        created_utc="",
        assumptions=a.describe(),
        notes=(
            "peak FLOP/s (dense, datasheet): " + ", ".join(f"{k} {v / _TERA:g} T" for k, v in sheet.peak_flop_per_s.items()),
            "compute[dtype].peak_flop_per_s is the datasheet peak times the assumed compute efficiency",
        ),
    )
