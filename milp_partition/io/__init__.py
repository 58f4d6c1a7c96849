"""Reading and writing instances: the native JSON format and the foreign ones.

=============  ==========================================  =======  =======
name           what                                        read     write
=============  ==========================================  =======  =======
``native``     ``"format": "milp-partition/1"`` JSON        yes      yes
``tarnawski``  Tarnawski et al. NeurIPS 2020 JSON           yes      yes
``pipedream``  PipeDream ``graph.txt`` profile              yes      no
``nodelink``   networkx node-link JSON                      yes      yes
=============  ==========================================  =======  =======

Every failure to open, parse or validate a file raises
:class:`~milp_partition.errors.InputError` naming the file, the node or field and
what to fix.  The schemas and mappings are documented in ``docs/FORMAT.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.native import CLUSTER_FORMAT, FORMAT, instance_from_dict, read_cluster, write_cluster, write_native
from milp_partition.io.nodelink import (
    from_networkx,
    looks_like_nodelink,
    nodelink_from_dict,
    to_networkx,
    write_nodelink,
)
from milp_partition.io.pipedream import looks_like_pipedream, parse_pipedream
from milp_partition.io.tarnawski import tarnawski_from_dict, write_tarnawski
from milp_partition.pipeline.problem import Instance

__all__ = [
    "READ_FORMATS",
    "WRITE_FORMATS",
    "detect_format",
    "from_networkx",
    "read_cluster",
    "read_instance",
    "to_networkx",
    "write_cluster",
    "write_instance",
]

#: Format names :func:`read_instance` accepts (besides ``"auto"``).
READ_FORMATS: tuple[str, ...] = ("native", "tarnawski", "pipedream", "nodelink")
#: Format names :func:`write_instance` accepts.
WRITE_FORMATS: tuple[str, ...] = ("native", "tarnawski", "nodelink")
_KNOWN = (
    f'native JSON ("format": "{FORMAT}"), Tarnawski JSON (maxFPGAs, nodes, edges), '
    "networkx node-link JSON (directed, nodes, links or edges) or a PipeDream graph.txt profile"
)


def _looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def _looks_like_tarnawski(data: Mapping[str, Any]) -> bool:
    nodes = data.get("nodes")
    first = nodes[0] if isinstance(nodes, list) and nodes else None
    return "nodes" in data and "edges" in data and ("maxFPGAs" in data or (isinstance(first, Mapping) and "fpgaLatency" in first))


def _json_format(data: Any, source: str) -> str:
    """The format of a parsed JSON value, or :class:`InputError` when none fits."""
    if not isinstance(data, Mapping):
        raise InputError(
            f"unknown format: the file holds a JSON {type(data).__name__}, not an object; expected {_KNOWN}",
            source=source,
        )
    fmt = data.get("format")
    if isinstance(fmt, str) and fmt.startswith("milp-partition/"):
        return "native"
    if isinstance(fmt, str) and fmt.startswith("strategy-tables/"):
        raise InputError(
            "this is a strategy-tables file (layer-wise parallelization), not a graph; "
            "solve it with 'milp-partition solve FILE --problem strategy' or read it with read_strategy_tables",
            source=source,
        )
    if fmt == CLUSTER_FORMAT:
        raise InputError("this is a cluster file, not a graph; pass it as the cluster (read_cluster)", source=source)
    if fmt is not None:
        raise InputError(f"unknown format {fmt!r}; expected {_KNOWN}", source=source)
    if looks_like_nodelink(data):
        return "nodelink"
    if _looks_like_tarnawski(data):
        return "tarnawski"
    keys = ", ".join(list(map(str, data))[:8]) or "none"
    raise InputError(f"unknown format (top-level keys: {keys}); expected {_KNOWN}", source=source)


def detect_format(path: str | Path) -> str:
    """The name of the format of the file at ``path`` (one of :data:`READ_FORMATS`).

    Raises
    ------
    InputError
        When the file cannot be read or its format is none of those known.
    """
    source = str(path)
    text = read_text_file(path)
    if _looks_like_json(text):
        return _json_format(parse_json(text, source), source)
    return _text_format(text, source)


def _text_format(text: str, source: str) -> str:
    if not text.strip():
        raise InputError("the file is empty; it should hold a graph", source=source)
    if looks_like_pipedream(text):
        return "pipedream"
    start = text.strip().splitlines()[0][:40]
    raise InputError(f"unknown format (the file starts with {start!r}); expected {_KNOWN}", source=source)


def read_instance(path: str | Path, fmt: str = "auto") -> Instance:
    """Read a graph (and its cluster, where the format has one) from a file.

    Parameters
    ----------
    path
        The file.
    fmt
        ``"auto"`` (detect from the content) or one of :data:`READ_FORMATS`.

    Returns
    -------
    Instance
        The validated graph, the cluster or ``None``, and ``source=str(path)``.

    Raises
    ------
    InputError
        On a missing or unreadable file, non-UTF-8 bytes, invalid JSON (with line and
        column), an unknown format, or an invalid graph or cluster; the message names
        the file and, where there is one, the node or field.
    """
    if fmt != "auto" and fmt not in READ_FORMATS:
        raise InputError(f"unknown format name {fmt!r}; use auto or one of {', '.join(READ_FORMATS)}", source=str(path))
    source = str(path)
    name = Path(path).stem
    text = read_text_file(path)
    if fmt == "pipedream" or (fmt == "auto" and not _looks_like_json(text)):
        if fmt == "auto":
            _text_format(text, source)
        return Instance(parse_pipedream(text, source, name=name), None, source)
    data = parse_json(text, source)
    if fmt == "auto":
        fmt = _json_format(data, source)
    if fmt == "native":
        return instance_from_dict(data, source, default_name=name)
    if fmt == "tarnawski":
        return tarnawski_from_dict(data, source, name=name)
    return nodelink_from_dict(data, source, name=name)


def write_instance(instance: Instance, path: str | Path, fmt: str = "native") -> None:
    """Write an instance to a file that :func:`read_instance` reads back equal.

    Parameters
    ----------
    instance
        What to write.
    path
        The file (overwritten).
    fmt
        One of :data:`WRITE_FORMATS`.

    Raises
    ------
    InputError
        On an unknown format name, an instance the format cannot express (Tarnawski),
        or a file that cannot be written.
    """
    writers = {"native": write_native, "tarnawski": write_tarnawski, "nodelink": write_nodelink}
    if fmt not in writers:
        raise InputError(f"cannot write format {fmt!r}; use one of {', '.join(WRITE_FORMATS)}", source=str(path))
    writers[fmt](instance, path)
