"""What the cleaner reads and writes of a partition's files beside its records: segment sizes and newest
timestamps, the groups of segments one cleaned segment replaces, the cleaned segment's indexes and
transaction index, and the partition's first dirty offset in the cleaner checkpoint.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from mmlog.log import txn_index
from mmlog.log.cleaner import checkpoint as cleaner_checkpoint, segment_swap
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_file
from mmlog.log.kernels import CRC_TABLES, scan_segment
from mmlog.system.files import atomic_write

INT32_MAX = 2**31 - 1


def segment_size(part, base: int) -> int:
    return os.path.getsize(segment_file(part.directory, base, LOG_SUFFIX))


def segment_max_timestamp(part, base: int) -> int:
    """The largest timestamp of an inactive segment (its time index's last entry)."""
    path = segment_file(part.directory, base, TIMEINDEX_SUFFIX)
    try:
        data = np.fromfile(path, dtype=np.int64)
    except FileNotFoundError:
        return -1
    if len(data) < 2:
        return -1
    ts = data[0::2]
    return int(ts.max()) if len(ts) else -1


def group_segments(part, bases: list[int], nxt: dict[int, int]) -> list[list[int]]:
    """Consecutive segments whose cleaned union fits one segment (Kafka's groupSegmentsBySize)."""
    config = part.config
    max_entries = config.segment_index_bytes // 8
    groups: list[list[int]] = []
    for base in bases:
        size = segment_size(part, base)
        if groups:
            g = groups[-1]
            total = sum(segment_size(part, b) for b in g) + size
            entries = total // max(config.index_interval_bytes, 1) + 1
            if total <= config.segment_bytes and entries < max_entries and nxt[base] - 1 - g[0] <= INT32_MAX:
                g.append(base)
                continue
        groups.append([base])
    return groups


def write_indexes(directory: Path, base: int, config) -> None:
    """Build the cleaned log's offset and time index (.cleaned) with recovery's own scan."""
    log_path = segment_swap.temp_file(directory, base, LOG_SUFFIX, segment_swap.CLEANED)
    size = os.path.getsize(log_path)
    cap = max(config.segment_index_bytes // 8, 2)
    index = np.zeros(2 * cap, np.int32)
    times = np.zeros(2 * max(config.segment_index_bytes // 16, 2), np.int64)
    n_idx = n_time = 0
    if size:
        with open(log_path, "rb") as f, mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            status, valid, _, _, n_idx, n_time, max_ts, off_max, _ = scan_segment(
                buf, 0, size, base, base, config.index_interval_bytes, False, CRC_TABLES, index, times, True)
            del buf
        if status != 0 or valid != size:
            raise ValueError(f"{log_path}: the cleaned log does not scan (status {status} at {valid})")
        last_ts = times[2 * n_time - 2] if n_time else -1
        if max_ts > last_ts and 2 * n_time + 2 <= len(times):  # the final entry a roll adds
            times[2 * n_time], times[2 * n_time + 1] = max_ts, off_max - base
            n_time += 1
    for suffix, data in ((INDEX_SUFFIX, index[: 2 * n_idx]), (TIMEINDEX_SUFFIX, times[: 2 * n_time])):
        path = segment_swap.temp_file(directory, base, suffix, segment_swap.CLEANED)
        with open(path, "wb") as f:
            f.write(data.tobytes())
            f.flush()
            os.fsync(f.fileno())


def carry_txnindex(directory: Path, group: list[int], live_markers: set) -> None:
    """The cleaned segment's .txnindex: the group's entries whose abort marker stays with its aborted
    data (Kafka's cleaned transaction index); none if no entry is left."""
    entries = [e for b in group for e in txn_index.read(directory, b) if e.last_offset in live_markers]
    if entries:
        path = segment_swap.temp_file(directory, group[0], segment_swap.TXNINDEX_SUFFIX, segment_swap.CLEANED)
        atomic_write(path, b"".join(txn_index.ENTRY.pack(txn_index.VERSION, *e) for e in entries))


def first_dirty_offset(directory: Path) -> int:
    key = cleaner_checkpoint.partition_key(directory)
    return cleaner_checkpoint.read(Path(directory).parent).get(key, 0)


def set_first_dirty(directory: Path, offset: int) -> None:
    directory = Path(directory)
    entries = cleaner_checkpoint.read(directory.parent)
    entries[cleaner_checkpoint.partition_key(directory)] = offset
    cleaner_checkpoint.write(directory.parent, entries)
