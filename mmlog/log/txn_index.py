"""The transaction index: the aborted transactions whose abort marker lies in a segment.

One file per segment, `<base>.txnindex`, created at the first abort marker appended
to the segment (most segments never have one). Kafka's layout (`TransactionIndex.java`,
`AbortedTxn.java`): entries of 34 bytes, big-endian, back to back, in marker order:

    0  version             int16   0
    2  producer id         int64
   10  first offset        int64   the transaction's first offset (maybe in an earlier segment)
   18  last offset         int64   the abort marker's offset
   26  last stable offset  int64   the LSO once the abort is decided (Kafka's lastStableOffset(txn)):
                                   the first offset of another producer's open transaction, else
                                   last offset + 1

What it is for: a read_committed fetch returns, with its records, the aborted
transactions that overlap them (`collect`), so that the consumer drops their records
(Kafka's collectAbortedTransactions). A search starts at the segment holding the fetch
offset and goes on to later segments until an entry's last stable offset reaches the
fetch's upper bound: no transaction aborted after that can have begun before the bound.

Writers (holding the partition lock) append an entry when an abort marker is appended,
leader and follower alike, after the marker's bytes are written and before the append
is published; readers take no lock. An entry is appended with one write, and a
reader sees a file's bytes up to its size, so a reader finds whole entries followed by
at most a partial one, which it ignores.

Crash points. The entry is written after the marker's bytes and before the state
publishes the append: a crash (or a failed write) between leaves an entry whose
marker is not in the log, or an entry torn at the file's tail. Recovery repairs both:
for every segment it rescans (from the one holding the recovery point) it rebuilds
the index from the log (`Partition._recover`, with the producer state as of the
segment's base), and it cuts every other index to whole entries below the log end
(`truncate`). Entries below the recovery point were fsynced with their segment
(`flush`). Truncation of the log truncates the index of the cut segment and deletes
the indexes of later segments with them; retention deletes an index with its segment.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from mmlog.log.files import TXNINDEX_SUFFIX, segment_file
from mmlog.system.files import fsync_file

VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry: an aborted transaction of producer_id over [first_offset, last_offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def path(directory: Path, base: int) -> Path:
    return segment_file(Path(directory), base, TXNINDEX_SUFFIX)


def append(directory: Path, base: int, txn: AbortedTxn) -> int:
    """Append an entry to segment `base`'s index (created if need be); returns the file's size
    before it, to undo a failed append with `cut`."""
    fd = os.open(path(directory, base), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        whole = size - size % ENTRY_SIZE  # a torn tail (a crash mid-write) is written over
        data = ENTRY.pack(VERSION, *txn)
        written = os.pwrite(fd, data, whole)
        if written != len(data):
            os.ftruncate(fd, whole)
            raise OSError(f"short write to {path(directory, base)}")
        return whole
    finally:
        os.close(fd)


def cut(directory: Path, base: int, size: int) -> None:
    """Cut segment `base`'s index back to `size` bytes (undo an append)."""
    try:
        os.truncate(path(directory, base), size)
    except FileNotFoundError:
        pass


def read(directory: Path, base: int) -> list[AbortedTxn]:
    """The whole entries of segment `base`'s index (none if it has no index)."""
    try:
        fd = os.open(path(directory, base), os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size - size % ENTRY_SIZE, 0)
    finally:
        os.close(fd)
    return [AbortedTxn(*fields[1:]) for fields in ENTRY.iter_unpack(data[: len(data) - len(data) % ENTRY_SIZE])]


def collect(entries: list[AbortedTxn], fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """The entries overlapping [fetch_offset, upper_bound), and whether the search is complete
    (an entry's last stable offset reached the bound: later segments cannot add any)."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound:
            return found, True
    return found, False


def truncate(directory: Path, base: int, offset: int) -> None:
    """Keep only the whole entries whose marker lies below `offset` (a log truncated to offset)."""
    p = path(directory, base)
    try:
        size = os.stat(p).st_size
    except FileNotFoundError:
        return
    entries = read(directory, base)
    keep = 0
    while keep < len(entries) and entries[keep].last_offset < offset:
        keep += 1
    if keep * ENTRY_SIZE != size:
        os.truncate(p, keep * ENTRY_SIZE)


def reset(directory: Path, base: int) -> None:
    """Remove segment `base`'s index (recovery rebuilds it)."""
    path(directory, base).unlink(missing_ok=True)


def flush(directory: Path, base: int) -> None:
    """fsync segment `base`'s index, if it has one."""
    fsync_file(path(directory, base))


def last_abort(directory: Path, bases: list[int]) -> int:
    """The offset of the newest abort marker indexed in these segments (-1: none)."""
    for base in reversed(bases):
        entries = read(directory, base)
        if entries:
            return entries[-1].last_offset
    return -1
