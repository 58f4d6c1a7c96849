"""The element-wise median of several measurements of the same things (``solve --time-layers --calibration-launches K``).

One calibration is one moment of the machine: on a machine with other work its layer times, empty steps, gloo's fits
and DDP's in-step cost moved by 20% to 4x between three calibrations run back to back (MLP-GELU, 1-minute load 9-10),
and the free optimum with them. :func:`median_of` takes K such measurements, each of one structure (dicts, lists,
tuples, dataclasses, numbers), and returns that structure with every number the median of its K values; what is not a
number (a name, a flag) or is the same in every measurement (a shape's stages, a rank count) is kept as it is.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import TypeVar

T = TypeVar("T")


def median_of(values: list[T]) -> T:
    """The element-wise median of ``values`` (one structure each; see the module).

    Dicts: every key of the first, the median over the measurements that have it; lists and tuples: position by
    position (they must have one length); dataclasses: field by field; numbers (not booleans): the median, the number
    itself where all agree (an integer stays one); anything else: the first one's.

    Raises
    ------
    ValueError
        When ``values`` is empty, or two lists or tuples at one place differ in length.
    """
    if not values:
        raise ValueError("no measurements to take the median of")
    first = values[0]
    if all(v == first for v in values[1:]) and not isinstance(first, float):
        return first
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        changes = {f.name: median_of([getattr(v, f.name) for v in values]) for f in dataclasses.fields(first)}
        return dataclasses.replace(first, **changes)  # type: ignore[type-var]
    if isinstance(first, dict):
        return type(first)(  # type: ignore[return-value, call-arg]
            {k: median_of([v[k] for v in values if isinstance(v, dict) and k in v]) for k in first}
        )
    if isinstance(first, list | tuple):
        if any(not isinstance(v, list | tuple) or len(v) != len(first) for v in values):
            raise ValueError(f"measurements of different lengths: {[len(v) for v in values]}")  # type: ignore[arg-type]
        return type(first)(median_of([v[i] for v in values]) for i in range(len(first)))  # type: ignore[return-value, index]
    if isinstance(first, int | float) and not isinstance(first, bool):
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return statistics.median(values)  # type: ignore[return-value, type-var]
    return first
