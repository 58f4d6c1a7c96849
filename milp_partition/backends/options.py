"""Each back-end's own options, in one place: what only one solver understands.

:class:`~milp_partition.backends.base.SolveParams` carries what every back-end reads (time limit, threads, seed,
progress, warm start, budget) and one ``options`` value: the options object of the back-end that solves (``None``:
its defaults).  A back-end reads its own with :func:`own_options` and refuses another's, naming both, so a CP-SAT
parameter never goes silently unused by CBC.  Settings that may run on any back-end hold a tuple of options objects,
at most one per back-end, and the chain hands the solving back-end its own (:func:`options_for`).

=============  ==================  =============================================================================
back-end       options             fields
=============  ==================  =============================================================================
``cpsat``      :class:`CpSatOptions`  ``max_scaled_magnitude`` (the integer scaling's cap), ``parameters``
                                      (``(name, value)`` pairs set on ``CpSolver.parameters``)
``cbc``        :class:`CbcOptions`    ``overrun_grace_s`` (how long past its limit CBC runs before it is interrupted)
``highs``      none                   (no option of its own: any options object is refused)
=============  ==================  =============================================================================

The registry names each back-end's options class (:attr:`~milp_partition.backends.registry.BackendEntry.options`).
This module imports no solver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from milp_partition.errors import InputError

__all__ = ["OPTIONS_CLASSES", "BackendOptions", "CbcOptions", "CpSatOptions", "no_options", "options_for", "own_options"]


@dataclass(frozen=True)
class CpSatOptions:
    """CP-SAT's own options.

    Attributes
    ----------
    max_scaled_magnitude
        The largest magnitude a scaled constraint may reach, which caps the time scale
        (see :mod:`milp_partition.backends.scaling`).
    parameters
        Extra ``(name, value)`` pairs set on ``CpSolver.parameters`` after the soundness parameters
        (e.g. ``("optimize_with_lb_tree_search", True)``); an unknown name is refused by OR-Tools.
    """

    backend: ClassVar[str] = "cpsat"
    max_scaled_magnitude: float = 2.0**40
    parameters: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class CbcOptions:
    """CBC's own options.

    Attributes
    ----------
    overrun_grace_s
        CBC checks its time limit between nodes, not inside a long LP solve; when it runs this long past the time
        limit it is interrupted (SIGINT: it stops and reports its incumbent), and killed after as long again.
    """

    backend: ClassVar[str] = "cbc"
    overrun_grace_s: float = 10.0


#: Any back-end's options.
BackendOptions = CpSatOptions | CbcOptions

#: The options class of each back-end that has options of its own (the registry's ``options`` names these).
OPTIONS_CLASSES: dict[str, type[CpSatOptions] | type[CbcOptions]] = {"cpsat": CpSatOptions, "cbc": CbcOptions}

OptionsT = TypeVar("OptionsT", CpSatOptions, CbcOptions)


def _refused(options: object, backend: str, expected: str) -> InputError:
    owner = getattr(options, "backend", None)
    return InputError(
        f"{type(options).__name__} are options of back-end {owner!r}, not of {backend!r}; "
        f"give {expected} or none (each back-end takes only its own options)",
        where="solver options",
    )


def own_options(options: object | None, backend: str, cls: type[OptionsT]) -> OptionsT:
    """``options`` when they are back-end ``backend``'s (``cls``), ``cls()`` for ``None``; :class:`InputError` naming
    both back-ends for another's."""
    if options is None:
        return cls()
    if type(options) is not cls:
        raise _refused(options, backend, cls.__name__)
    return options


def no_options(options: object | None, backend: str) -> None:
    """For a back-end without options of its own: :class:`InputError` for any options object."""
    if options is not None:
        raise _refused(options, backend, "no options object (it has none)")


def options_for(options: Iterable[BackendOptions], backend: str) -> BackendOptions | None:
    """The options of ``backend`` among ``options`` (at most one per back-end), ``None`` when none is given.

    Raises
    ------
    InputError
        When ``options`` holds something that is no back-end's options, or two objects for one back-end.
    """
    found: dict[str, BackendOptions] = {}
    for o in options:
        if type(o) not in OPTIONS_CLASSES.values():
            raise InputError(
                f"{o!r} is no back-end's options; give {', '.join(c.__name__ for c in OPTIONS_CLASSES.values())}",
                where="solver options",
            )
        if o.backend in found:
            raise InputError(f"two options objects for back-end {o.backend!r}; give one", where="solver options")
        found[o.backend] = o
    return found.get(backend)
