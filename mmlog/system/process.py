"""A process's name, as ps and /proc/<pid>/comm show it: tools and tests tell the broker's processes apart by it."""

from __future__ import annotations

import ctypes


def name_process(name: str) -> None:
    """Set this process's name (prctl PR_SET_NAME), what ps and /proc/<pid>/comm show."""
    try:
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass
