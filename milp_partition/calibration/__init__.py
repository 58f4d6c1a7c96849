"""Calibration of the cost model: device profiles, the microbenchmark suite, fits.

* :mod:`.profile` -- :class:`DeviceProfile`, its JSON file, datasheet and path resolution.
* :mod:`.datasheets` -- vendor numbers for V100, A100, H100, H200 (source ``datasheet``).
* :mod:`.backend`, :mod:`.kernels`, :mod:`.timing`, :mod:`.settings`, :mod:`.suite` -- the microbenchmark
  suite over an array module (NumPy, or CuPy on a GPU), every kernel checked before it is timed.
* :mod:`.fit`, :mod:`.build` -- least-squares fits with held-out validation, and the measured profile.
* :mod:`.apply` -- node times of a pipeline graph from FLOPs and bytes (``--profile``).
"""

from milp_partition.calibration.profile import (
    PROFILE_FORMAT,
    AlphaBeta,
    ComputeRate,
    DeviceProfile,
    FitRecord,
    Measurement,
    datasheet_profile,
    load_profile,
    resolve_profile,
    write_profile,
)

__all__ = [
    "PROFILE_FORMAT",
    "AlphaBeta",
    "ComputeRate",
    "DeviceProfile",
    "FitRecord",
    "Measurement",
    "datasheet_profile",
    "load_profile",
    "resolve_profile",
    "write_profile",
]
