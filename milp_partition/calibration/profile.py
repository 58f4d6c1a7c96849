"""Device profiles: the fitted cost model of one device, and its versioned JSON file.

A :class:`DeviceProfile` says how long work takes on one device:

* ``compute_time_s(flops, bytes_moved, dtype)`` -- a roofline with size-dependent
  efficiency and a floor at the launch latency::

      t = max(launch_latency_s,
              compute[dtype].overhead_s + flops / compute[dtype].peak_flop_per_s,   # if flops > 0
              memory.alpha_s + bytes_moved * memory.beta_s_per_byte)             # if bytes_moved > 0

  The compute term is the fit ``time = t0 + flops / peak`` of the matrix-product
  benchmark; it makes the achieved fraction of peak grow with size,
  ``efficiency(flops) = (flops / peak) / (t0 + flops / peak)`` (one half at
  ``flops = t0 * peak``).  The memory term is the alpha-beta fit of the streaming
  benchmarks (``1 / beta`` is the effective bandwidth).
* ``transfer_time_s(nbytes, kind)`` -- ``alpha + nbytes * beta`` for ``kind`` in
  ``h2d``, ``d2h``, ``d2d``; 0 for no bytes.
* ``allreduce_time_s(nbytes, p)`` -- the ring model
  ``2 (p - 1) / p * nbytes * beta + 2 (p - 1) * alpha``; 0 for ``p == 1``.

A profile is either ``measured`` (by ``milp-partition calibrate``, backend ``cupy`` or
``numpy``) or ``datasheet`` (built from vendor numbers, backend ``datasheet``, its
efficiencies stated as assumptions in ``assumptions``).  The two are never confused:
:func:`load_profile` checks that ``source`` and ``backend`` agree.

File format (``"format": "milp-partition-profile/1"``), one JSON object; every number is
in seconds, bytes, FLOPs or FLOP/s as its field name says:

``format``            ``"milp-partition-profile/1"``
``name``              device name (e.g. ``"NVIDIA H100 80GB HBM3"``, ``"H100-SXM (datasheet)"``)
``source``            ``"measured"`` or ``"datasheet"``
``backend``           ``"cupy"``, ``"numpy"`` (source measured) or ``"datasheet"``
``memory_bytes``      device memory in bytes, or null when unknown
``created_utc``       ISO-8601 date and time of the run (or of the datasheet table)
``versions``          object of strings: library, driver and runtime versions, host
``launch_latency_s``  time of an almost-empty kernel (numpy: of a tiny operation)
``compute``           object dtype -> ``{"peak_flop_per_s", "overhead_s"}``
``memory``            ``{"alpha_s", "beta_s_per_byte", "note"}``: streaming kernels
``links``             object kind (``h2d``, ``d2h``, ``d2d``) -> ``{"alpha_s", "beta_s_per_byte", "note"}``
``allreduce``         ``{"alpha_s", "beta_s_per_byte", "note"}``: ring-model step latency and inverse bandwidth
``fits``              array of fit records: ``name``, ``model``, ``coefficients`` (object of numbers),
                      ``r2``, ``max_rel_residual``, ``n_points``, ``n_holdout``,
                      ``holdout_median_rel_error``, ``holdout_max_rel_error`` (null without held-out points)
``measurements``      array of raw measurements: ``benchmark``, ``label``, ``size``, ``flops``, ``bytes``,
                      ``time_s`` (the median), ``times_s`` (every repeat), ``held_out``
``assumptions``       array of strings: what was assumed rather than measured
``notes``             array of strings: anything else a reader should know
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.io.json_text import parse_json, read_text_file

#: The ``format`` value this module reads and writes.
PROFILE_FORMAT = "milp-partition-profile/1"
#: Transfer kinds a profile carries.
TRANSFER_KINDS: tuple[str, ...] = ("h2d", "d2h", "d2d")
#: Allowed ``(source, backend)`` pairs.
_SOURCE_BACKENDS: Mapping[str, tuple[str, ...]] = {"measured": ("cupy", "numpy"), "datasheet": ("datasheet",)}


@dataclass(frozen=True)
class Regime:
    """One size range of a piecewise latency-bandwidth model: from ``from_bytes`` on, ``alpha_s + nbytes * beta``."""

    from_bytes: float
    alpha_s: float
    beta_s_per_byte: float


@dataclass(frozen=True)
class AlphaBeta:
    """A latency-bandwidth model: ``time_s = alpha_s + nbytes * beta_s_per_byte``, or one such line per size regime.

    Attributes
    ----------
    alpha_s
        Fixed cost per operation in seconds (with regimes: the largest sizes' regime).
    beta_s_per_byte
        Seconds per byte (the inverse of the effective bandwidth; with regimes: the largest sizes').
    note
        What was actually measured or assumed (e.g. "memcpy between two host buffers").
    regimes
        Empty for one line; else the regimes in ascending ``from_bytes`` (the first from 0), e.g. copies that
        fit in a cache and copies that stream from memory.  ``time_s`` uses the regime that covers the size.
    """

    alpha_s: float
    beta_s_per_byte: float
    note: str = ""
    regimes: tuple[Regime, ...] = ()

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Effective bandwidth ``1 / beta`` in bytes per second."""
        return math.inf if self.beta_s_per_byte == 0 else 1.0 / self.beta_s_per_byte

    def time_s(self, nbytes: float) -> float:
        """Seconds for ``nbytes`` bytes (by the regime that covers ``nbytes``, when there are regimes)."""
        for regime in reversed(self.regimes):
            if nbytes >= regime.from_bytes:
                return regime.alpha_s + nbytes * regime.beta_s_per_byte
        return self.alpha_s + nbytes * self.beta_s_per_byte


@dataclass(frozen=True)
class ComputeRate:
    """The fit ``time_s = overhead_s + flops / peak_flop_per_s`` for one data type.

    Attributes
    ----------
    peak_flop_per_s
        Asymptotic FLOP rate of large matrix products.
    overhead_s
        Fixed time per product; sets the size at which half of peak is reached.
    """

    peak_flop_per_s: float
    overhead_s: float

    def time_s(self, flops: float) -> float:
        """Seconds for ``flops`` floating-point operations."""
        return self.overhead_s + flops / self.peak_flop_per_s

    def efficiency(self, flops: float) -> float:
        """Achieved fraction of peak at ``flops``: ``(flops / peak) / time``."""
        if flops <= 0:
            return 0.0
        return (flops / self.peak_flop_per_s) / self.time_s(flops)


@dataclass(frozen=True)
class FitRecord:
    """The quality of one least-squares fit.

    Attributes
    ----------
    name
        Which fit (e.g. ``"gemm float32"``, ``"link h2d"``).
    model
        The fitted formula, in words (e.g. ``"time_s = alpha_s + bytes * beta_s_per_byte"``).
    coefficients
        Fitted values by name, in the units of their names.
    r2
        Coefficient of determination of the fitted points.
    max_rel_residual
        Largest ``|predicted - measured| / measured`` over the fitted points.
    n_points, n_holdout
        Points fitted and points held out.
    holdout_median_rel_error, holdout_max_rel_error
        Median and largest relative prediction error on the held-out points (None without any).
    """

    name: str
    model: str
    coefficients: Mapping[str, float]
    r2: float
    max_rel_residual: float
    n_points: int
    n_holdout: int = 0
    holdout_median_rel_error: float | None = None
    holdout_max_rel_error: float | None = None


@dataclass(frozen=True)
class Measurement:
    """One raw measurement: a benchmark at one size, every repeat kept.

    Attributes
    ----------
    benchmark
        ``gemm``, ``copy``, ``scale_add``, ``empty``, ``reduction``, ``h2d``, ``d2h``, ``d2d``, ``allreduce``.
    label
        Data type, device pair or other qualifier (e.g. ``"float32"``, ``"0->1"``).
    size
        The benchmark's size parameter (matrix order, elements or bytes; see ``bytes``).
    flops, bytes
        Floating-point operations and bytes moved by one run.
    time_s
        Median time of one run in seconds.
    times_s
        Every timed repeat in seconds.
    held_out
        True when this point was left out of its fit and used to validate it.
    """

    benchmark: str
    label: str
    size: int
    flops: float
    bytes: float
    time_s: float
    times_s: tuple[float, ...] = ()
    held_out: bool = False


@dataclass(frozen=True)
class DeviceProfile:
    """The cost model of one device, measured or from a datasheet (see the module docstring).

    Attributes
    ----------
    name
        Device name, e.g. ``"H100-SXM (datasheet)"`` or the measured device's name.
    source
        ``"measured"`` or ``"datasheet"``.
    backend
        ``"cupy"``, ``"numpy"`` or ``"datasheet"``.
    memory_bytes
        Device memory in bytes, None if unknown.
    launch_latency_s
        Time of an almost-empty kernel; the floor of :meth:`compute_time_s`.
    compute
        Data type name -> :class:`ComputeRate`.
    memory
        Streaming-kernel alpha-beta model (``1 / beta`` = effective memory bandwidth).
    links
        Transfer kind (``h2d``, ``d2h``, ``d2d``) -> :class:`AlphaBeta`.
    allreduce
        Ring all-reduce step latency ``alpha_s`` and inverse bandwidth ``beta_s_per_byte``.
    fits, measurements
        Quality of every fit and every raw measurement (empty for datasheet profiles).
    versions
        Library, driver and runtime versions and host description.
    created_utc
        When the profile was made (ISO 8601).
    assumptions, notes
        What was assumed rather than measured; other remarks.
    """

    name: str
    source: str
    backend: str
    memory_bytes: int | None
    launch_latency_s: float
    compute: Mapping[str, ComputeRate]
    memory: AlphaBeta
    links: Mapping[str, AlphaBeta]
    allreduce: AlphaBeta
    fits: tuple[FitRecord, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict)
    created_utc: str = ""
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in _SOURCE_BACKENDS.get(self.source, ()):
            raise ValueError(
                f"profile source {self.source!r} with backend {self.backend!r}: expected one of {dict(_SOURCE_BACKENDS)}"
            )

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Data types with a compute rate."""
        return tuple(self.compute)

    def compute_rate(self, dtype: str = "float32") -> ComputeRate:
        """The :class:`ComputeRate` of ``dtype``; :class:`InputError` if this profile has none."""
        try:
            return self.compute[dtype]
        except KeyError:
            raise InputError(
                f"no compute rate for dtype {dtype!r}; this profile has {', '.join(self.compute) or 'none'}",
                source=self.name,
            ) from None

    def compute_time_s(self, flops: float, bytes_moved: float, dtype: str = "float32") -> float:
        """Seconds for one kernel doing ``flops`` operations and moving ``bytes_moved`` bytes.

        ``max(launch_latency_s, overhead_s + flops / peak, alpha_s + bytes_moved * beta)``,
        each term present only when its amount is positive.
        """
        t = self.launch_latency_s
        if flops > 0:
            t = max(t, self.compute_rate(dtype).time_s(flops))
        if bytes_moved > 0:
            t = max(t, self.memory.time_s(bytes_moved))
        return t

    def flop_efficiency(self, flops: float, dtype: str = "float32") -> float:
        """Achieved fraction of peak FLOP/s for a product of ``flops`` operations."""
        return self.compute_rate(dtype).efficiency(flops)

    def transfer_time_s(self, nbytes: float, kind: str = "d2d") -> float:
        """Seconds to move ``nbytes`` bytes: ``alpha + nbytes * beta`` of link ``kind`` (0 for no bytes)."""
        if kind not in self.links:
            raise ValueError(f"unknown transfer kind {kind!r}; expected one of {', '.join(self.links)}")
        if nbytes <= 0:
            return 0.0
        return self.links[kind].time_s(nbytes)

    def allreduce_time_s(self, nbytes: float, participants: int) -> float:
        """Ring all-reduce of ``nbytes`` over ``participants`` devices; 0 for one participant."""
        if participants < 1:
            raise ValueError(f"participants must be at least 1, got {participants}")
        if participants == 1 or nbytes <= 0:
            return 0.0
        p = participants
        return 2 * (p - 1) / p * nbytes * self.allreduce.beta_s_per_byte + 2 * (p - 1) * self.allreduce.alpha_s


# ----------------------------------------------------------------------------------------------
# JSON
# ----------------------------------------------------------------------------------------------


def profile_to_dict(profile: DeviceProfile) -> dict[str, Any]:
    """The JSON object of ``profile`` (format ``milp-partition-profile/1``)."""

    def ab(x: AlphaBeta) -> dict[str, Any]:
        out: dict[str, Any] = {"alpha_s": x.alpha_s, "beta_s_per_byte": x.beta_s_per_byte, "note": x.note}
        if x.regimes:
            out["regimes"] = [
                {"from_bytes": r.from_bytes, "alpha_s": r.alpha_s, "beta_s_per_byte": r.beta_s_per_byte} for r in x.regimes
            ]
        return out

    return {
        "format": PROFILE_FORMAT,
        "name": profile.name,
        "source": profile.source,
        "backend": profile.backend,
        "memory_bytes": profile.memory_bytes,
        "created_utc": profile.created_utc,
        "versions": dict(profile.versions),
        "launch_latency_s": profile.launch_latency_s,
        "compute": {k: {"peak_flop_per_s": v.peak_flop_per_s, "overhead_s": v.overhead_s} for k, v in profile.compute.items()},
        "memory": ab(profile.memory),
        "links": {k: ab(v) for k, v in profile.links.items()},
        "allreduce": ab(profile.allreduce),
        "fits": [
            {
                "name": f.name,
                "model": f.model,
                "coefficients": dict(f.coefficients),
                "r2": _json_float(f.r2),
                "max_rel_residual": _json_float(f.max_rel_residual),
                "n_points": f.n_points,
                "n_holdout": f.n_holdout,
                "holdout_median_rel_error": f.holdout_median_rel_error,
                "holdout_max_rel_error": f.holdout_max_rel_error,
            }
            for f in profile.fits
        ],
        "measurements": [
            {
                "benchmark": m.benchmark,
                "label": m.label,
                "size": m.size,
                "flops": m.flops,
                "bytes": m.bytes,
                "time_s": m.time_s,
                "times_s": list(m.times_s),
                "held_out": m.held_out,
            }
            for m in profile.measurements
        ],
        "assumptions": list(profile.assumptions),
        "notes": list(profile.notes),
    }


def _json_float(x: float) -> float | None:
    return x if math.isfinite(x) else None


def write_profile(profile: DeviceProfile, path: str | Path) -> None:
    """Write ``profile`` as JSON to ``path``; :class:`InputError` if the file cannot be written."""
    text = json.dumps(profile_to_dict(profile), indent=1, allow_nan=False) + "\n"
    write_atomic(path, text, what="the profile")  # atomically, only over a regular file


def load_profile(path: str | Path) -> DeviceProfile:
    """Read and validate a profile JSON.

    Raises
    ------
    InputError
        Naming the file and the field, when the file cannot be read, is not JSON, is not a
        profile (another ``format``), or holds a missing or wrong field.
    """

    src = str(path)
    return profile_from_dict(parse_json(read_text_file(path), src), src)


def profile_from_dict(data: Any, source: str = "<profile>") -> DeviceProfile:
    """Validate a parsed profile JSON object and build the :class:`DeviceProfile`."""
    r = _Reader(source)
    if not isinstance(data, dict):
        raise InputError(f'expected a JSON object with "format": "{PROFILE_FORMAT}"', source=source)
    fmt = data.get("format")
    if fmt != PROFILE_FORMAT:
        raise InputError(
            f'not a device profile: expected "{PROFILE_FORMAT}", got {fmt!r}; make one with `milp-partition calibrate`',
            source=source,
            where="field 'format'",
        )
    src_kind = r.choice(data, "source", tuple(_SOURCE_BACKENDS))
    backend = r.choice(data, "backend", _SOURCE_BACKENDS[src_kind])
    memory_bytes = data.get("memory_bytes")
    if memory_bytes is not None and (isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0):
        raise InputError(
            f"must be a positive whole number of bytes or null, got {memory_bytes!r}", source=source, where="field 'memory_bytes'"
        )
    compute_obj = r.obj(data, "compute")
    if not compute_obj:
        raise InputError("needs at least one dtype", source=source, where="field 'compute'")
    compute = {
        str(k): ComputeRate(
            peak_flop_per_s=r.number(r.obj(compute_obj, k, "compute"), "peak_flop_per_s", f"compute.{k}", positive=True),
            overhead_s=r.number(compute_obj[k], "overhead_s", f"compute.{k}"),
        )
        for k in compute_obj
    }
    links_obj = r.obj(data, "links")
    for kind in TRANSFER_KINDS:
        if kind not in links_obj:
            raise InputError(f"missing transfer kind {kind!r}", source=source, where="field 'links'")
    return DeviceProfile(
        name=r.string(data, "name"),
        source=src_kind,
        backend=backend,
        memory_bytes=memory_bytes,
        launch_latency_s=r.number(data, "launch_latency_s", ""),
        compute=compute,
        memory=r.alpha_beta(data, "memory", ""),
        links={k: r.alpha_beta(links_obj, k, "links") for k in links_obj},
        allreduce=r.alpha_beta(data, "allreduce", ""),
        fits=tuple(r.fit(f, i) for i, f in enumerate(r.array(data, "fits"))),
        measurements=tuple(r.measurement(m, i) for i, m in enumerate(r.array(data, "measurements"))),
        versions={str(k): str(v) for k, v in r.obj(data, "versions").items()},
        created_utc=r.string(data, "created_utc"),
        assumptions=tuple(r.strings(data, "assumptions")),
        notes=tuple(r.strings(data, "notes")),
    )


#: Range of a nonzero profile number (rates in bytes or FLOP per second, times in seconds): beyond it costs overflow.
_MIN_FIELD, _MAX_FIELD = 1e-15, 1e21


@dataclass(frozen=True)
class _Reader:
    """Field readers that raise :class:`InputError` naming the file and the field."""

    source: str

    def _fail(self, where: str, message: str) -> InputError:
        return InputError(message, source=self.source, where=f"field '{where}'")

    @staticmethod
    def _path(parent: str, key: object) -> str:
        return f"{parent}.{key}" if parent else str(key)

    def _get(self, obj: Mapping[str, Any], key: str, parent: str) -> Any:
        if key not in obj:
            raise self._fail(self._path(parent, key), "missing")
        return obj[key]

    def number(self, obj: Mapping[str, Any], key: str, parent: str, *, positive: bool = False) -> float:
        v = self._get(obj, key, parent)
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > _MAX_FIELD:
            v = math.inf  # an integer too large for a float: refused below as not finite
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 or (positive and v == 0):
            need = "a positive finite number" if positive else "a non-negative finite number"
            raise self._fail(self._path(parent, key), f"must be {need}, got {v!r}")
        if v > _MAX_FIELD or (v != 0 and v < _MIN_FIELD):
            raise self._fail(
                self._path(parent, key), f"must be 0 or from {_MIN_FIELD:g} to {_MAX_FIELD:g}, got {v!r}: check its unit"
            )
        return float(v)

    def optional_number(self, obj: Mapping[str, Any], key: str, parent: str) -> float | None:
        if obj.get(key) is None:
            return None
        return self.number(obj, key, parent)

    def string(self, obj: Mapping[str, Any], key: str, parent: str = "") -> str:
        v = self._get(obj, key, parent)
        if not isinstance(v, str):
            raise self._fail(self._path(parent, key), f"must be a string, got {v!r}")
        return v

    def choice(self, obj: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
        v = self._get(obj, key, "")
        if v not in allowed:
            raise self._fail(key, f"must be one of {', '.join(allowed)}, got {v!r}")
        return v

    def obj(self, obj: Mapping[str, Any], key: str, parent: str = "") -> dict[str, Any]:
        v = self._get(obj, key, parent)
        if not isinstance(v, dict):
            raise self._fail(self._path(parent, key), f"must be an object, got {type(v).__name__}")
        return v

    def array(self, obj: Mapping[str, Any], key: str, parent: str = "") -> list[Any]:
        v = self._get(obj, key, parent)
        if not isinstance(v, list):
            raise self._fail(self._path(parent, key), f"must be an array, got {type(v).__name__}")
        return v

    def strings(self, obj: Mapping[str, Any], key: str) -> list[str]:
        v = self.array(obj, key)
        if not all(isinstance(s, str) for s in v):
            raise self._fail(key, "must be an array of strings")
        return v

    def integer(self, obj: Mapping[str, Any], key: str, parent: str) -> int:
        v = self._get(obj, key, parent)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self._fail(self._path(parent, key), f"must be a non-negative whole number, got {v!r}")
        return v

    def alpha_beta(self, obj: Mapping[str, Any], key: str, parent: str) -> AlphaBeta:
        path = self._path(parent, key)
        o = self.obj(obj, key, parent)
        note = o.get("note", "")
        if not isinstance(note, str):
            raise self._fail(f"{path}.note", "must be a string")
        regimes = []
        raw = o.get("regimes", [])
        if not isinstance(raw, list):
            raise self._fail(f"{path}.regimes", "must be a list")
        for k, r in enumerate(raw):
            rpath = f"{path}.regimes[{k}]"
            if not isinstance(r, dict):
                raise self._fail(rpath, "must be an object")
            regimes.append(
                Regime(
                    self.number(r, "from_bytes", rpath),
                    self.number(r, "alpha_s", rpath),
                    self.number(r, "beta_s_per_byte", rpath),
                )
            )
            if k == 0 and regimes[0].from_bytes != 0:
                raise self._fail(f"{rpath}.from_bytes", "the first regime must start at 0 bytes")
            if k and regimes[k].from_bytes <= regimes[k - 1].from_bytes:
                raise self._fail(f"{rpath}.from_bytes", "regimes must be in ascending from_bytes")
        return AlphaBeta(self.number(o, "alpha_s", path), self.number(o, "beta_s_per_byte", path), note, tuple(regimes))

    def fit(self, f: Any, i: int) -> FitRecord:
        path = f"fits[{i}]"
        if not isinstance(f, dict):
            raise self._fail(path, "must be an object")
        coeffs = self.obj(f, "coefficients", path)
        for k, v in coeffs.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise self._fail(f"{path}.coefficients.{k}", f"must be a finite number, got {v!r}")
        r2 = f.get("r2")
        if r2 is not None and (isinstance(r2, bool) or not isinstance(r2, int | float) or not math.isfinite(r2) or r2 > 1):
            raise self._fail(f"{path}.r2", f"must be a number at most 1 or null, got {r2!r}")
        return FitRecord(
            name=self.string(f, "name", path),
            model=self.string(f, "model", path),
            coefficients={str(k): float(v) for k, v in coeffs.items()},
            r2=math.nan if r2 is None else float(r2),
            max_rel_residual=math.nan if f.get("max_rel_residual") is None else self.number(f, "max_rel_residual", path),
            n_points=self.integer(f, "n_points", path),
            n_holdout=self.integer(f, "n_holdout", path),
            holdout_median_rel_error=self.optional_number(f, "holdout_median_rel_error", path),
            holdout_max_rel_error=self.optional_number(f, "holdout_max_rel_error", path),
        )

    def measurement(self, m: Any, i: int) -> Measurement:
        path = f"measurements[{i}]"
        if not isinstance(m, dict):
            raise self._fail(path, "must be an object")
        times = self.array(m, "times_s", path)
        for j, t in enumerate(times):
            if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
                raise self._fail(f"{path}.times_s[{j}]", f"must be a non-negative finite number, got {t!r}")
        held = m.get("held_out", False)
        if not isinstance(held, bool):
            raise self._fail(f"{path}.held_out", f"must be true or false, got {held!r}")
        return Measurement(
            benchmark=self.string(m, "benchmark", path),
            label=self.string(m, "label", path),
            size=self.integer(m, "size", path),
            flops=self.number(m, "flops", path),
            bytes=self.number(m, "bytes", path),
            time_s=self.number(m, "time_s", path),
            times_s=tuple(float(t) for t in times),
            held_out=held,
        )


# ----------------------------------------------------------------------------------------------
# Datasheets and resolution
# ----------------------------------------------------------------------------------------------


def datasheet_profile(name: str) -> DeviceProfile:
    """The datasheet profile of ``name`` (``V100``, ``A100``, ``H100``, ``H200``; case-insensitive).

    The numbers and their sources are in :mod:`milp_partition.calibration.datasheets`;
    ``source`` is ``"datasheet"`` and the efficiencies are listed in ``assumptions``.
    """
    from milp_partition.calibration.datasheets import build_datasheet_profile

    return build_datasheet_profile(name)


def resolve_profile(spec: str | Path) -> DeviceProfile:
    """A datasheet name (``V100``, ``A100``, ``H100``, ``H200``) or the path of a profile JSON."""
    from milp_partition.calibration.datasheets import DATASHEETS

    text = str(spec)
    if text.strip().upper() in DATASHEETS and not Path(text).exists():
        return datasheet_profile(text)
    path = Path(text)
    if not path.exists():
        raise InputError(
            f"neither a datasheet name ({', '.join(DATASHEETS)}) nor an existing profile file", source=text, where="--profile"
        )
    return load_profile(path)
