"""Helpers the storage tests share: recognisable batches and brute-force oracles over the files.

The oracles never use the indexes or the kernels under test: they read every
`.log` file of a partition directory from byte 0 with `records.iter_batches`
and decode records with `records.decode_records`.
"""

from __future__ import annotations

import bisect
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmlog.log import rolled_flush
from mmlog.log.files import segment_bases, segment_file
from mmlog.log.offset_index import OffsetIndex
from mmlog.protocol import records as rec

T0 = 1_700_000_000_000  # the pinned wall clock's start (conftest's `clock`)


class Clock:
    """The log's wall clock as a test sets it (`clock.now`)."""

    now = T0


@dataclass(frozen=True)
class StoredBatch:
    """One batch found in a partition's files."""

    segment: int  # base offset of the segment holding it
    position: int  # byte position inside that segment's .log
    header: rec.BatchHeader
    data: bytes

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset


def log_bytes(directory: Path, base: int) -> bytes:
    return segment_file(Path(directory), base, ".log").read_bytes()


def stored_batches(directory: Path) -> list[StoredBatch]:
    """Every whole batch of every segment, in offset order (trailing partial bytes ignored)."""
    out = []
    for base in segment_bases(Path(directory)):
        data = log_bytes(directory, base)
        for pos, header in rec.iter_batches(data):
            out.append(StoredBatch(base, pos, header, data[pos : pos + header.size]))
    return out


def stored_records(directory: Path) -> list[rec.Record]:
    return [r for b in stored_batches(directory) for r in rec.decode_records(b.data)]


def assert_dense_and_valid(directory: Path, start: int = None) -> list[StoredBatch]:
    """Every byte of every segment is a CRC-valid batch, and offsets follow each other without gaps."""
    batches = []
    expected = start
    for base in segment_bases(Path(directory)):
        data = log_bytes(directory, base)
        pos = 0
        while pos < len(data):
            header = rec.validate_batch(data, pos)
            if expected is None:
                expected = header.base_offset
            assert header.base_offset == expected, f"segment {base} position {pos}: offset gap"
            batches.append(StoredBatch(base, pos, header, data[pos : pos + header.size]))
            expected = header.next_offset
            pos += header.size
    return batches


def random_records(rng: random.Random, n: int, ts_base: int = 1_700_000_000_000,
                   ts_spread: int = 0) -> list[rec.Record]:
    """n records with random keys, values and headers; nulls included; timestamps jittered by ts_spread."""
    out = []
    for _ in range(n):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 20))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 300))
        headers = [(f"h{j}", None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 8)))
                   for j in range(rng.randrange(0, 3))]
        ts = ts_base + (rng.randrange(-ts_spread, ts_spread + 1) if ts_spread else 0)
        out.append(rec.Record(value, key, headers, ts))
    return out


def random_batch(rng: random.Random, max_records: int = 4, **kw) -> bytearray:
    return rec.build_batch(random_records(rng, rng.randrange(1, max_records + 1), **kw))


def tagged_batch(tag: str, records: int = 1, pad: int = 0) -> bytearray:
    """A batch whose record values name it: b'<tag>/<i>' (+ pad filler bytes)."""
    return rec.build_batch([(tag.encode(), f"{tag}/{i}".encode() + b"." * pad) for i in range(records)])


def tags_of(batch: bytes) -> str:
    """The tag a tagged_batch was built with."""
    return rec.decode_records(batch)[0].key.decode()


def open_descriptors(under: Path | None = None) -> int:
    """Descriptors this process holds now (once the rolled-segment flusher, which opens a segment's files
    for a moment after each roll, is idle); `under`: only those of files in that directory, so that what
    other threads of a long test session open meanwhile (sockets, pipes) is not counted."""
    rolled_flush.wait_idle()
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    prefix = str(under) + "/"
    return sum(1 for target in _descriptor_targets() if target.startswith(prefix))


def _descriptor_targets() -> list[str]:
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed since the listing (the listing's own descriptor among them)
            continue
    return targets


def open_descriptors_to_deleted_files(directory: Path) -> list[str]:
    """Targets of this process's descriptors that point at unlinked files of a directory."""
    prefix = str(directory) + "/"
    return [t for t in _descriptor_targets() if t.startswith(prefix) and t.endswith("(deleted)")]


def expected_indexes(base: int, batches: list[StoredBatch], interval: int, sealed: bool) -> tuple[list, list]:
    """The offset and time index entries one segment's batches get by the documented rules.

    Offset index: an entry for each batch that starts `interval` bytes or more after the
    previous entry, never at position 0. Time index: beside each offset index entry, the
    largest timestamp so far and the last offset of its batch, if it grew; once more when sealed.
    """
    offsets, times = [], []
    since, max_ts, off_max, last_ts = 0, -1, -1, -1
    for b in batches:
        if b.header.max_timestamp > max_ts:
            max_ts, off_max = b.header.max_timestamp, b.last_offset
        if since >= interval and b.position > 0:
            offsets.append((b.base_offset - base, b.position))
            if max_ts > last_ts:
                times.append((max_ts, off_max - base))
                last_ts = max_ts
            since = 0
        since += b.header.size
    if sealed and max_ts > last_ts:
        times.append((max_ts, off_max - base))
    return offsets, times


def index_on_disk(p, base: int) -> list[tuple[int, int]]:
    """A segment's valid offset index entries, read from its file (the count from the state if active)."""
    flat = np.fromfile(segment_file(p.directory, base, ".index"), dtype=np.int32)
    snap = p.state.snapshot()
    n = snap.index_entries if base == snap.active_base else len(flat) // 2
    return [tuple(e) for e in flat[: 2 * n].reshape(-1, 2).tolist()]


def time_index_on_disk(p, base: int) -> list[tuple[int, int]]:
    flat = np.fromfile(segment_file(p.directory, base, ".timeindex"), dtype=np.int64)
    snap = p.state.snapshot()
    n = snap.time_entries if base == snap.active_base else len(flat) // 2
    return [tuple(e) for e in flat[: 2 * n].reshape(-1, 2).tolist()]


def check_indexes(p) -> None:
    """Both indexes of every segment are what its batches, found by walking its .log file, call for."""
    batches = stored_batches(p.directory)
    active = p.state.snapshot().active_base
    for base in segment_bases(p.directory):
        mine = [b for b in batches if b.segment == base]
        offsets, times = expected_indexes(base, mine, p.config.index_interval_bytes, sealed=base != active)
        assert index_on_disk(p, base) == offsets
        assert time_index_on_disk(p, base) == times
        stamps = [(r.offset, r.timestamp) for b in mine for r in rec.decode_records(b.data)]
        for ts, rel in times:  # what a lookup relies on: no record up to an entry is later than it
            assert max(t for o, t in stamps if o <= base + rel) == ts
        check_offset_lookups(p.directory, base, mine, offsets)


def check_offset_lookups(directory: Path, base: int, batches: list[StoredBatch], offsets: list) -> None:
    """OffsetIndex.lookup of every offset: the floor entry, at a batch boundary (from the .log) not after its batch."""
    boundaries = {b.position: b.base_offset for b in batches}
    starts = [base + rel for rel, _ in offsets]
    index = OffsetIndex(segment_file(directory, base, ".index"), base, create=False)
    try:
        for b in batches:
            for offset in range(b.base_offset, b.last_offset + 1):
                got_offset, got_position = index.lookup(offset, len(offsets))
                i = bisect.bisect_right(starts, offset) - 1
                assert (got_offset, got_position) == ((starts[i], offsets[i][1]) if i >= 0 else (base, 0))
                assert boundaries[got_position] == got_offset and got_position <= b.position
    finally:
        index.close()


def truncate_by_epoch(follower, leader) -> None:
    """What a follower's fetcher does before fetching: rounds of OffsetsForLeaderEpoch until done."""
    while True:
        asked = follower.latest_epoch()
        if follower.truncate_to_leader_epoch(asked, *leader.end_offset_for_epoch(asked)):
            return
