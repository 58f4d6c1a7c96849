"""Typed errors raised where input enters the tool.

Every error carries a message that names the file, the node or field, and
what to fix.  The CLI prints ``str(error)`` and exits non-zero; it never
shows a traceback for these.
"""

from __future__ import annotations


class MilpPartitionError(Exception):
    """Base class of every error the tool raises on purpose."""


class InputError(MilpPartitionError):
    """An input file or value is unreadable, malformed or inconsistent.

    Parameters
    ----------
    message
        What is wrong and what to fix.
    source
        The file (or other origin) the value came from, if known.
    where
        The node, edge or field that is wrong, if known.
    """

    def __init__(self, message: str, *, source: str | None = None, where: str | None = None) -> None:
        self.source = source
        self.where = where
        parts = []
        if source:
            parts.append(str(source))
        if where:
            parts.append(where)
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class CycleError(InputError):
    """The graph has a directed cycle; ``cycle`` lists its node ids in order."""

    def __init__(self, cycle: list[str], *, source: str | None = None) -> None:
        self.cycle = cycle
        path = " -> ".join([*cycle, cycle[0]]) if cycle else "?"
        super().__init__(
            f"the graph has a cycle: {path}; a computational graph must be acyclic, remove or reverse one of these edges",
            source=source,
        )


class SolverUnavailableError(MilpPartitionError):
    """A requested solver back-end is not installed or cannot run."""


class ModelError(MilpPartitionError):
    """A formulation asked a back-end for something it cannot express."""
