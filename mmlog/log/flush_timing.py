"""Where a process hears how long each log flush took (the broker's flush-time histogram).

The log layer knows nothing of metrics (they live above it, `ipc/metrics_block.py`):
a process that counts them sets `observer` to a callable taking seconds, and
`Partition` calls `observed` after every fsync of its segments. None (the default,
and in tools that open logs) costs one comparison per flush.
"""

from __future__ import annotations

from typing import Callable

observer: Callable[[float], None] | None = None


def observed(seconds: float) -> None:
    """A flush took `seconds`: tell this process's observer, if it has one."""
    if observer is not None:
        observer(seconds)
