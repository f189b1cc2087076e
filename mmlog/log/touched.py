"""Which partitions of a log dir changed lately: a shared board the owner's timers sweep instead of every partition.

The owner's housekeeping (flushes, rolls, retention, the metrics scrape) used to look at
every hosted partition on each pass, reading its state page (or opening it), though most
are idle: the partitions' state changes in the processors, where the owner cannot see it
without looking. Here every process that publishes a partition's state (`state.py`:
append, update, replication, transactions) stamps the partition's slot of its log dir's
board with the board's current pass number; a pass of the owner moves the number on and
takes the slots stamped since the pass before. An idle partition then costs a pass
nothing, and the work follows the partitions that changed.

Layout of `<log dir>/.partitions-touched` (SLOTS uint32, native order, mapped shared by
every process that opens a partition of the log dir): slot 0 the pass number (starting at
FIRST_PASS), slot 1 + crc32(directory name) mod (SLOTS - 1) the pass in which that
partition's state last changed. Two partitions may share a slot: a pass then sees both
when either changed (more work, never less). A stamp is a load and maybe a store, no
lock: a writer that read the number just before a pass moved it stamps the old one after,
so a sweep takes the stamps of the previous pass too (`sweep`); the state itself stays in
the partition's page, so a partition seen twice is only looked at twice.

Crash points: none that matter: the board is a hint; a lost or torn board file is made
again zeroed, and the owner's first pass after a start looks at every partition anyway.
"""

from __future__ import annotations

import os
import threading
import zlib
from pathlib import Path

import numpy as np

from mmlog.log.files import MappedFile

BOARD_FILE = ".partitions-touched"
SLOTS = 1 << 16
FIRST_PASS = 2  # above the zeros of a new file, so that a stamp always differs from "never"

_lock = threading.Lock()
_boards: dict[str, "Board"] = {}


def slot_of(name: str) -> int:
    """The board slot of a partition directory's name."""
    return 1 + zlib.crc32(name.encode()) % (SLOTS - 1)


class Board:
    """One log dir's board, mapped in this process."""

    def __init__(self, log_dir: Path) -> None:
        self.file = MappedFile(Path(log_dir) / BOARD_FILE, np.uint32, SLOTS * 4)
        self.file.reserve(SLOTS * 4)  # blocks before the first store (files.py: disk blocks)
        self.array = self.file.view
        self.slots = memoryview(self.array)  # one slot through it: a Python int in ~50 ns
        if self.slots[0] < FIRST_PASS:
            self.slots[0] = FIRST_PASS

    def stamp(self, slot: int) -> None:
        """The partition at `slot` changed (called by every state publish)."""
        slots = self.slots
        now = slots[0]
        if slots[slot] != now:
            slots[slot] = now

    def sweep(self) -> np.ndarray:
        """Move to the next pass; the slots stamped since the pass before the last one (see the docstring)."""
        array = self.array
        current = int(array[0])
        array[0] = current + 1
        return np.flatnonzero(array[1:] >= current - 1) + 1


def board_for(log_dir: Path) -> Board:
    """The board of a log dir, mapped once per process (forked children share the parent's mapping)."""
    key = os.path.abspath(log_dir)
    board = _boards.get(key)
    if board is None:
        with _lock:
            board = _boards.get(key)
            if board is None:
                board = _boards[key] = Board(Path(key))
    return board


def release(log_dir: Path) -> None:
    """Unmap a log dir's board in this process: for a process done with the dir (a tool, a test), which
    must have closed every partition of it first (their state pages stamp the board)."""
    with _lock:
        board = _boards.pop(os.path.abspath(log_dir), None)
    if board is not None:
        board.slots.release()
        board.array = None
        board.file.close()
