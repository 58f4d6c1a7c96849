"""Calibration of the cost model: device profiles, the microbenchmark suite, fits.

* :mod:`.profile` -- :class:`DeviceProfile`, its JSON file, datasheet and path resolution.
* :mod:`.datasheets` -- vendor numbers for V100, A100, H100, H200 (source ``datasheet``).
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
