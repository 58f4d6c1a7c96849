"""Writing output files atomically, and only over regular files.

Every file the commands write (results, imported graphs, profiles, plots, tables) goes to a
temporary file in the target's folder and is renamed over the target, so a failed write
(a full disk, ``ulimit -f``, an interrupt) leaves the previous file as it was.  A target that
exists and is not a regular file (a device such as ``/dev/null``, a pipe, a socket, a
symbolic link) is refused: a rename would replace the device or the link itself, not write
through it (as root, ``-o /dev/null`` would have replaced ``/dev/null``).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from milp_partition.errors import InputError


def check_target(path: str | Path, what: str = "--output") -> None:
    """Raise :class:`InputError` when ``path`` exists and is not a regular file (symbolic links included)."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"cannot inspect the target: {exc.strerror or exc}", source=str(path), where=what) from None
    if stat.S_ISDIR(mode):
        raise InputError("is a folder; give a file name", source=str(path), where=what)
    if stat.S_ISLNK(mode):
        raise InputError(
            "is a symbolic link; give the path of a regular file (the link is not replaced)", source=str(path), where=what
        )
    if not stat.S_ISREG(mode):
        raise InputError(
            "is not a regular file (a device, pipe or socket); give the path of a regular file", source=str(path), where=what
        )


def write_atomic(path: str | Path, data: str | bytes, what: str = "--output") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file in the same folder and a rename.

    Raises :class:`InputError` (one line) when the target is not a regular file or the write fails; the old
    file, if any, is then untouched and no temporary file is left.
    """
    path = Path(path)
    check_target(path, what)
    parent = path.parent if str(path.parent) else Path(".")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        check_target(path, what)  # again, just before the rename
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise InputError(
            f"cannot write the file: {exc.strerror or exc} (nothing was replaced)", source=str(path), where=what
        ) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
