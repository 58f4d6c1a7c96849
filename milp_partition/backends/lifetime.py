"""Child processes that die with their parent (Linux: ``prctl(PR_SET_PDEATHSIG)``; a no-op elsewhere).

A CBC child or a ``gap`` worker left behind by a parent killed with SIGKILL (which no handler
sees) would run on to its own time limit.  :func:`die_with_parent` runs in the child (a
``preexec_fn`` of :class:`subprocess.Popen`, an ``initializer`` of a process pool) and asks the
kernel to kill it when its parent goes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """In a child process: have the kernel send ``sig`` when the parent dies; ``False`` where that is not available.

    When the parent is already gone (the race between fork and this call) the child exits at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent == 1 or os.getppid() != parent:  # orphaned before the request took effect
        os._exit(1)
    return True
