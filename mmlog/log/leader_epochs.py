"""The leader epoch cache: which leader epoch began at which offset (`leader-epoch-checkpoint`).

File: `<partition dir>/leader-epoch-checkpoint`, Kafka's text format:

    0                 version
    <n>               number of entries
    <epoch> <start>   n lines, epochs and start offsets both strictly increasing

Each entry says "records from `start` on were written by the leader of `epoch`", up
to the next entry's start (or the log end, for the last). A leader adds
(epoch, its log end) when it becomes leader; a follower adds an entry when it copies
the first batch stamped with a newer epoch. OffsetsForLeaderEpoch answers from it
(`end_offset_for`), and a follower that returns truncates to what the leader says
its epochs ended at, so no two replicas ever hold different records at an offset.

Writers hold the partition lock; the file is replaced atomically and durably on every
change (`system.files.atomic_write`: a crash, a power loss included, leaves the old or the new
list). The cache changes only when leadership
changes, a new epoch is copied, or the log is truncated or trimmed: never per
append. Other processes re-read it when its stamp changed.

Crash points: a crash after a truncation of the log but before the cache was
trimmed leaves entries past the log end; `truncate_from_end` runs again after
recovery (the partition trims the cache to its recovered log end at open), and
an entry past the log end is harmless for `end_offset_for` anyway (it answers
with the log end for the latest epoch). A file that does not parse (written by a
version that renamed it before its data reached the disk, then a power loss: empty
or zero-filled) is rebuilt from the epochs stamped in the log's batches, as Kafka's
recovery does (`Partition._drop_unreadable_epochs`, `_rebuild_epochs`); it never stops the broker.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from mmlog.system.files import atomic_write, file_stamp

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


class CorruptCheckpoint(ValueError):
    """The checkpoint file does not parse."""


class LeaderEpochCache:
    """(epoch, start offset) entries of one partition, mirrored in its checkpoint file."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self._stamp: tuple[int, int, int] | None = None  # read at first use: every method reloads first

    # ------------------------------------------------------------ reading

    def reload(self) -> None:
        """Read the file again if another process replaced it."""
        stamp = file_stamp(self.path)
        if stamp == self._stamp:
            return
        entries = parse(self.path.read_text()) if stamp is not None else []
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self._stamp = stamp

    def entries(self) -> list[tuple[int, int]]:
        self.reload()
        return list(zip(self._epochs, self._starts))

    def latest_epoch(self) -> int:
        self.reload()
        return self._epochs[-1] if self._epochs else UNDEFINED

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor answers it.

        The latest epoch ends at the log end. An older one ends where the next larger
        epoch starts, answered with the largest epoch we know at or below the one asked
        (the asker then truncates there and asks again with that one). An epoch below
        all we know ends where our first starts; one above all of them is undefined.
        """
        self.reload()
        if epoch == UNDEFINED or not self._epochs:
            return UNDEFINED, UNDEFINED
        if epoch == self._epochs[-1]:
            return epoch, log_end
        higher = bisect.bisect_right(self._epochs, epoch)  # first entry with a larger epoch
        if higher == len(self._epochs):
            return UNDEFINED, UNDEFINED
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # ------------------------------------------------------------ changing (under the partition lock)

    def assign(self, epoch: int, start: int) -> bool:
        """Record that `epoch` starts at `start` if it is newer than every epoch here; True if it was."""
        self.reload()
        if self._epochs and epoch <= self._epochs[-1]:
            return False
        if self._starts and start < self._starts[-1]:
            # A newer epoch cannot start before an older one: the older entries past it are stale.
            keep = bisect.bisect_left(self._starts, start)
            del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start)
        self._save()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at end_offset: drop the entries that start at or after it."""
        self.reload()
        keep = bisect.bisect_left(self._starts, end_offset)
        if keep < len(self._starts):
            del self._epochs[keep:], self._starts[keep:]
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at start_offset: entries wholly before it go, the one spanning it starts there."""
        self.reload()
        spanning = bisect.bisect_right(self._starts, start_offset) - 1
        if spanning < 0 or (spanning == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:spanning], self._starts[:spanning]
        self._starts[0] = start_offset
        self._save()

    def clear(self) -> None:
        self.reload()
        if self._epochs:
            self._epochs, self._starts = [], []
            self._save()

    def rebuild(self, entries) -> None:
        """Replace the cache with `entries` ((epoch, start) ascending, read from the log's batches): what
        the partition's recovery does when the file does not parse (`CorruptCheckpoint`)."""
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self._save()

    def _save(self) -> None:
        atomic_write(self.path, format_entries(zip(self._epochs, self._starts)).encode())
        self._stamp = file_stamp(self.path)


def format_entries(entries) -> str:
    lines = [f"{epoch} {start}" for epoch, start in entries]
    return f"0\n{len(lines)}\n" + "".join(line + "\n" for line in lines)


def parse(text: str) -> list[tuple[int, int]]:
    """The entries of a checkpoint file's text (Kafka's format, version 0)."""
    lines = text.split("\n")
    try:
        if lines[0].strip() != "0":
            raise CorruptCheckpoint(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        entries = [tuple(int(x) for x in line.split()) for line in lines[2 : 2 + count]]
    except (IndexError, ValueError) as exc:
        raise CorruptCheckpoint(str(exc)) from exc
    if len(entries) != count or any(len(e) != 2 for e in entries):
        raise CorruptCheckpoint(f"expected {count} entries of two numbers")
    return entries
