"""Process and thread names, as ps, top -H and /proc show them: tools and tests tell the broker's parts apart by them."""

from __future__ import annotations

import ctypes


def name_thread(name: str) -> None:
    """Name the calling thread (prctl PR_SET_NAME, at most 15 bytes: /proc/<pid>/task/<tid>/comm, top -H); in a
    process's first thread that is the process's name (ps, /proc/<pid>/comm)."""
    try:
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass


name_process = name_thread  # what a child process calls first, in its only thread
