"""Print and check the record batches of segment files, like Kafka's kafka-dump-log.sh --files.

    mmlog dump-log [--print-records] [--index] PATH...

PATH is a segment's `.log` file, a partition directory (all of its segments, in
offset order) or a `.index`/`.timeindex` file (its entries, checked against the
`.log` beside it). Each batch prints one line: offsets, record count, byte
position and size, timestamps, codec, producer id/epoch/sequence and CRC, and
flags (transactional, control, LogAppendTime); a transaction marker (a control
batch) adds what it says, as Kafka's tool does: `endTxnMarker: COMMIT|ABORT
coordinatorEpoch: N`. `--print-records` adds a line per record, `--index` the segment's index entries,
each checked against the log. A summary line (files, batches, records, bytes) ends
the output.

Checking is recovery's own check, `kernels.scan_segment`: length, magic, CRC-32C
and offset continuity (the first batch starts at the segment's base offset, each
next one where the previous ended; consecutive segments of a directory follow each
other). The first invalid byte ends the dump: everything before it has been
printed, and one line names the file, the byte position where the invalid batch
starts and what is wrong, e.g.

    mmlog: error: /data/t-0/00000000000000000000.log: bad CRC at position 12345: ...

and the exit status is 1. (A CRC covers a whole batch, so the position is that of
the batch holding the bad byte.)

Live partitions are safe to dump: files are opened read-only and read with pread
in chunks of CHUNK_BYTES, never mmap-ed (a truncation by the broker under a mapping
would kill this process with SIGBUS), and never written. The active segment is
read up to the committed size published in `partition.state`: bytes past it are an
append in progress or a dead writer's leftovers, which the next append overwrites,
so they are counted in a note rather than reported as corruption.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, TextIO

import numpy as np

from mmlog.errors import CorruptMessage
from mmlog.log import kernels, state
from mmlog.log.cleaner import checkpoint as cleaner_checkpoint
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_bases
from mmlog.protocol import compression, records
from mmlog.cli import CommandError

# Bytes read per pread. 4 MiB keeps memory flat on a 1 GiB segment while making the
# per-chunk cost (a syscall, one kernel call) negligible beside printing its batches.
CHUNK_BYTES = 4 << 20

CODECS = compression.NAMES

# scan_segment wants index buffers to fill; zero-capacity ones make it write nothing.
_NO_OFFSET_ENTRIES = np.zeros(0, dtype=np.int32)
_NO_TIME_ENTRIES = np.zeros(0, dtype=np.int64)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", type=Path,
                        help=".log, .index or .timeindex files, or partition directories")
    parser.add_argument("--print-records", "--deep", "--deep-iteration", action="store_true", dest="print_records",
                        help="print every record: offset, timestamp, key, value, headers")
    parser.add_argument("--index", action="store_true",
                        help="also print each segment's .index and .timeindex entries, checked against the log")
    parser.add_argument("--max-width", type=int, default=64, metavar="N",
                        help="show at most N characters of a key, value or header value (default 64)")


def run(args: argparse.Namespace) -> int:
    if args.max_width < 8:
        raise CommandError(f"--max-width {args.max_width}: must be at least 8", 2)
    notes: list[str] = []
    plan = [target for path in args.paths for target in targets(path, notes)]  # every PATH checked first
    dumper = Dumper(sys.stdout, print_records=args.print_records, max_width=args.max_width)
    dumper.totals.notes += notes
    try:
        for target in plan:
            dumper.dump(target, show_log=target.only is None, show_index=args.index or target.only is not None)
    finally:
        dumper.print_summary()
    return 0


# ---------------------------------------------------------------- what to dump


@dataclass(frozen=True)
class Target:
    """One segment to dump: its .log, where its committed bytes end, its index entry counts."""

    log: Path
    base_offset: int
    committed: int | None = None  # the active segment's committed size, from partition.state
    index_entries: int | None = None  # valid entries of a (preallocated) active index, from the state
    time_entries: int | None = None
    chained: bool = False  # it must start where the segment dumped just before it ended
    only: str | None = None  # INDEX_SUFFIX or TIMEINDEX_SUFFIX: that index alone was asked for


def targets(path: Path, notes: list[str]) -> Iterator[Target]:
    """The segments PATH names, in offset order; CommandError for anything else."""
    if path.is_dir():
        bases = segment_bases(path)
        if not bases:
            raise CommandError(f"{path}: no segment (.log) files in this directory")
        snap = read_state(path)
        if snap is not None and bases[0] <= snap.active_base < bases[-1]:
            # A roll creates the new segment before it publishes it: readers do not see it yet.
            newer = [b for b in bases if b > snap.active_base]
            bases = [b for b in bases if b <= snap.active_base]
            notes.append(f"{path.name}: {len(newer)} segment(s) from offset {newer[0]} on not shown: "
                         "newer than the active segment in partition.state (a roll in progress)")
        for i, base in enumerate(bases):
            yield _target(path / f"{base:020d}{LOG_SUFFIX}", base, snap, chained=i > 0)
        return
    if not path.exists():
        raise CommandError(f"{path}: no such file or directory")
    suffix = path.suffix
    if suffix not in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        raise CommandError(f"{path}: not a .log, .index or .timeindex file, nor a partition directory")
    base = _base_from_name(path)
    log = path.with_suffix(LOG_SUFFIX)
    if suffix != LOG_SUFFIX and not log.exists():
        raise CommandError(f"{path}: its log {log.name} is missing, so its entries cannot be checked")
    snap = read_state(path.parent) if base is not None else None
    yield _target(log, base, snap, only=None if suffix == LOG_SUFFIX else suffix)


def _target(log: Path, base: int | None, snap: state.Snapshot | None, **kw) -> Target:
    if base is None:  # not named like a segment: take the first batch's word for its base
        with open(log, "rb") as f:
            head = f.read(8)
        base = int.from_bytes(head, "big", signed=True) if len(head) == 8 else 0
    if snap is not None and base == snap.active_base:
        kw.update(committed=snap.active_size, index_entries=snap.index_entries, time_entries=snap.time_entries)
    return Target(log, base, **kw)


def _base_from_name(path: Path) -> int | None:
    stem = path.name.partition(".")[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def read_state(directory: Path) -> state.Snapshot | None:
    """A consistent snapshot of a partition's state page, read without mapping or writing it.

    `PartitionState` maps the page read-write (and stamps the magic on a new one), which
    a dump must not do; this reads the same slots with pread under the same seqlock rule:
    SEQ even and unchanged across the copy. None if there is no usable state file, or it
    stays torn (a writer died mid-update): the files alone are dumped then.
    """
    try:
        fd = os.open(directory / state.STATE_FILE, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        slot = 8  # bytes per slot
        for attempt in range(1000):
            before = os.pread(fd, slot, state.SEQ * slot)
            page = os.pread(fd, (state.LAST + 1) * slot, 0)
            after = os.pread(fd, slot, state.SEQ * slot)
            if len(page) < (state.LAST + 1) * slot:
                return None
            slots = np.frombuffer(page, dtype=np.int64)
            if slots[state.MAGIC_SLOT] != state.MAGIC:
                return None
            seq = int.from_bytes(before, sys.byteorder, signed=True)
            if not seq & 1 and before == after == page[state.SEQ * slot : (state.SEQ + 1) * slot]:
                snap = state.Snapshot(*(int(v) for v in slots[state.FIRST : state.LAST + 1]))
                return None if snap.deleted or snap.generation == 0 else snap
            if attempt > 10:
                time.sleep(0.001)
        return None
    finally:
        os.close(fd)


# ---------------------------------------------------------------- walking a log


class Corruption(Exception):
    """The first invalid byte of a segment: where its batch starts and what is wrong."""

    def __init__(self, position: int, status: int, detail: str = "") -> None:
        what = kernels.SCAN_REASONS[status]
        super().__init__(f"{what} at position {position}" + (f": {detail}" if detail else ""))
        self.position = position
        self.status = status  # a kernels.SCAN_* code


@dataclass(frozen=True, slots=True)
class Batch:
    """A valid batch: its header, its file position, and the buffer holding its bytes."""

    position: int
    header: records.BatchHeader
    buf: bytes  # the chunk it was read in
    at: int  # where in buf it starts


@dataclass
class Walk:
    """What a walk over a segment found; filled in as the walk goes."""

    next_offset: int
    end: int = 0  # bytes of valid batches from the start of the file
    gaps: bool = False  # a compacted log: batches may start past the next offset (cleaner_checkpoint.py)


def walk_log(fd: int, segment_base: int, end: int, walk: Walk, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Batch]:
    """Yield every valid batch of the first `end` bytes of a segment, in order.

    Validity is decided by `kernels.scan_segment`, chunk by chunk; batch headers come
    from `records.iter_batches` over the part of each chunk it found valid. At the first
    invalid byte the walk raises Corruption (after yielding everything before it).
    """
    pos = 0
    want = chunk_bytes
    while pos < end:
        chunk = os.pread(fd, min(want, end - pos), pos)
        if len(chunk) < min(want, end - pos):
            end = pos + len(chunk)  # the file shrank while we read it (a truncation)
        buf = np.frombuffer(chunk, dtype=np.uint8)
        status, valid, next_offset, *_ = kernels.scan_segment(
            buf, 0, len(chunk), segment_base, walk.next_offset, 0, True, kernels.CRC_TABLES,
            _NO_OFFSET_ENTRIES, _NO_TIME_ENTRIES, walk.gaps,
        )
        valid = int(valid)
        for at, header in records.iter_batches(memoryview(chunk)[:valid]):
            yield Batch(pos + at, header, chunk, at)
        walk.next_offset = int(next_offset)
        walk.end = pos + valid
        if status == kernels.SCAN_END:
            pos += len(chunk)
            want = chunk_bytes
            continue
        if status == kernels.SCAN_TORN and pos + len(chunk) < end:
            # The chunk cut the batch, not the file: read on from it, whole.
            left = chunk[valid:]
            size = records.LOG_OVERHEAD + int.from_bytes(left[8:12], "big", signed=True) if len(left) >= 12 else 0
            want = max(chunk_bytes, size, records.HEADER_SIZE)
            pos += valid
            continue
        raise Corruption(pos + valid, int(status),
                         _explain(int(status), chunk, valid, end - pos - valid, walk.next_offset, segment_base))


def _explain(status: int, chunk: bytes, at: int, left: int, expected: int, segment_base: int) -> str:
    """What exactly is wrong with the batch at chunk[at:] (which scan_segment rejected)."""
    if status == kernels.SCAN_TORN:
        if left < records.LOG_OVERHEAD:
            return f"the file ends {left} bytes into a batch header"
        size = records.LOG_OVERHEAD + int.from_bytes(chunk[at + 8 : at + 12], "big", signed=True)
        return f"a batch of {size} bytes, but the file ends {left} bytes into it"
    length = int.from_bytes(chunk[at + 8 : at + 12], "big", signed=True)
    if status == kernels.SCAN_BAD_LENGTH:
        return f"batchLength {length} is less than the {records.HEADER_SIZE - records.LOG_OVERHEAD} a header needs"
    h = records.read_header(chunk, at)
    if status == kernels.SCAN_BAD_MAGIC:
        return f"magic {h.magic}, expected {records.MAGIC}"
    offsets = f"batch of offsets {h.base_offset}..{h.last_offset}"
    if status == kernels.SCAN_BAD_CRC:
        buf = np.frombuffer(chunk, dtype=np.uint8)
        actual = int(kernels.crc32c(buf, at + records.CRC_START, at + h.size, kernels.CRC_TABLES))
        return f"{offsets}: stored CRC-32C {h.crc:#010x}, computed {actual:#010x}"
    if h.base_offset != expected:
        where = "the segment's base offset" if expected == segment_base else "where the previous batch ended"
        return f"{offsets} should start at offset {expected} ({where})"
    return f"{offsets}: lastOffsetDelta {h.last_offset_delta} out of range for segment base {segment_base}"


# ---------------------------------------------------------------- index checks


class IndexCheck:
    """Checks a segment's offset and time index entries against its batches, as they stream by.

    Offset index entry (relative offset, position): a batch starts at that position,
    and its base offset is the segment's base plus the relative offset. Time index
    entry (timestamp, relative offset): the offset is the last offset of a batch whose
    max timestamp is the entry's, and no batch up to it has a larger one (so the
    timestamp is the segment's largest so far). Entries only grow, so one pointer each
    suffices.
    """

    def __init__(self, base: int, offsets: np.ndarray, times: np.ndarray) -> None:
        self.base = base
        self.offsets = offsets  # (n, 2) int32
        self.times = times  # (n, 2) int64
        self.offset_notes: list[str] = [""] * len(offsets)
        self.time_notes: list[str] = [""] * len(times)
        self._i = 0
        self._j = 0
        self._max_ts = -1

    def see(self, position: int, h: records.BatchHeader) -> None:
        offsets, times = self.offsets, self.times
        while self._i < len(offsets) and offsets[self._i, 1] < position:
            self.offset_notes[self._i] = f"position {offsets[self._i, 1]} is not the start of a batch"
            self._i += 1
        if self._i < len(offsets) and offsets[self._i, 1] == position:
            if self.base + int(offsets[self._i, 0]) != h.base_offset:
                self.offset_notes[self._i] = f"the batch at position {position} starts at offset {h.base_offset}"
            self._i += 1
        self._max_ts = max(self._max_ts, h.max_timestamp)
        while self._j < len(times) and self.base + int(times[self._j, 1]) <= h.last_offset:
            ts, offset = int(times[self._j, 0]), self.base + int(times[self._j, 1])
            if offset < h.base_offset:
                self.time_notes[self._j] = f"offset {offset} is not in any batch"
            elif offset != h.last_offset or ts != h.max_timestamp:
                self.time_notes[self._j] = (
                    f"the batch holding offset {offset} ends at {h.last_offset} with max timestamp {h.max_timestamp}"
                )
            elif ts != self._max_ts:
                self.time_notes[self._j] = f"the largest timestamp up to offset {offset} is {self._max_ts}"
            self._j += 1

    def finish(self, valid_end: int, next_offset: int) -> None:
        for i in range(self._i, len(self.offsets)):
            self.offset_notes[i] = f"position {self.offsets[i, 1]} is past the last batch (log ends at {valid_end})"
        for j in range(self._j, len(self.times)):
            offset = self.base + int(self.times[j, 1])
            self.time_notes[j] = f"offset {offset} is past the last batch (next offset {next_offset})"


def read_index(path: Path, dtype: np.dtype, entries: int | None) -> np.ndarray:
    """The valid entries of an index file as (n, 2): `entries` of them, or, for a
    preallocated file without a state to say, those before the first all-zero pair
    (no valid entry is all zero: positions, and timestamps, are positive)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return np.zeros((0, 2), dtype=dtype)
    pairs = np.frombuffer(data[: len(data) - len(data) % (2 * dtype.itemsize)], dtype=dtype).reshape(-1, 2)
    if entries is None:
        zero = np.flatnonzero((pairs[:, 0] == 0) & (pairs[:, 1] == 0))
        entries = int(zero[0]) if len(zero) else len(pairs)
    return pairs[: min(entries, len(pairs))]


# ---------------------------------------------------------------- printing


@dataclass
class Totals:
    files: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


class Dumper:
    """Prints segments, accumulating the totals for the summary line."""

    def __init__(self, out: TextIO, *, print_records: bool = False, max_width: int = 64) -> None:
        self.out = out
        self.print_records = print_records
        self.max_width = max_width
        self.totals = Totals()
        self._previous: tuple[Path, int] | None = None  # (log, next offset) of the last segment dumped

    @staticmethod
    def _gaps(target: Target) -> bool:
        """Whether the log cleaner has cleaned this partition (offset gaps are then its doing)."""
        return cleaner_checkpoint.was_cleaned(target.log.parent)

    def dump(self, target: Target, show_log: bool = True, show_index: bool = False) -> None:
        """Dump one segment; raise CommandError at its first invalid byte (or index entry)."""
        write = self.out.write
        try:
            fd = os.open(target.log, os.O_RDONLY)
        except OSError as exc:
            raise CommandError(f"{target.log}: {exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            end = size
            if target.committed is not None and target.committed <= size:
                end = target.committed
            if target.chained and self._previous is not None:
                prev_log, prev_next = self._previous
                if prev_next != target.base_offset and not (self._gaps(target) and target.base_offset > prev_next):
                    raise CommandError(
                        f"{target.log}: bad offset at position 0: the segment starts at offset "
                        f"{target.base_offset} but {prev_log.name} ends before offset {prev_next}"
                    )
            check = None
            if show_index:
                check = IndexCheck(
                    target.base_offset,
                    read_index(target.log.with_suffix(INDEX_SUFFIX), np.dtype(np.int32), target.index_entries),
                    read_index(target.log.with_suffix(TIMEINDEX_SUFFIX), np.dtype(np.int64), target.time_entries),
                )
            if show_log:
                write(f"Dumping {target.log}\n")
                write(f"Starting offset: {target.base_offset}\n")
            walk = Walk(next_offset=target.base_offset, gaps=self._gaps(target))
            self.totals.files += 1
            try:
                for batch in walk_log(fd, target.base_offset, end, walk):
                    h = batch.header
                    self.totals.batches += 1
                    self.totals.records += h.records_count
                    self.totals.bytes += h.size
                    if check is not None:
                        check.see(batch.position, h)
                    if show_log:
                        write(format_batch(batch.position, h, crc_ok=True) + _marker(batch) + "\n")
                        if self.print_records and not h.is_control:
                            self._print_records(target.log, batch)
            except Corruption as exc:
                if show_log and exc.status in (kernels.SCAN_BAD_CRC, kernels.SCAN_BAD_OFFSET):
                    # The batch is whole and its header readable: show what it claims.
                    h = records.read_header(os.pread(fd, records.HEADER_SIZE, exc.position))
                    write(format_batch(exc.position, h, crc_ok=exc.status != kernels.SCAN_BAD_CRC) + "  <- INVALID\n")
                raise CommandError(f"{target.log}: {exc}") from None
            if end < size:
                self.totals.notes.append(
                    f"{target.log.name}: {size - end} bytes past the committed size {end} not shown "
                    "(an append in progress, or left by a writer that died)"
                )
            self._previous = (target.log, walk.next_offset)
            if check is not None:
                check.finish(walk.end, walk.next_offset)
                self._print_index(target, check, show=target.only)
        finally:
            os.close(fd)

    def _print_records(self, log: Path, batch: Batch) -> None:
        h = batch.header
        try:
            recs = records.decode_records(batch.buf, batch.at)
        except CorruptMessage as exc:
            raise CommandError(f"{log}: bad records at position {batch.position}: {exc}") from None
        if len(recs) != h.records_count:
            raise CommandError(f"{log}: bad records at position {batch.position}: "
                               f"{len(recs)} records, header says {h.records_count}")
        w = self.max_width
        for r in recs:
            headers = ", ".join(f"{show_text(k, w)}={show_bytes(v, w)}" for k, v in r.headers)
            self.out.write(
                f"| offset: {r.offset} timestamp: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} valueSize: {-1 if r.value is None else len(r.value)} "
                f"key: {show_bytes(r.key, w)} value: {show_bytes(r.value, w)} headers: [{headers}]\n"
            )

    def _print_index(self, target: Target, check: IndexCheck, show: str | None) -> None:
        base = target.base_offset
        # (suffix, entry size, entries, notes, printed line, how the error line names an entry)
        sections = [
            (INDEX_SUFFIX, 8, check.offsets, check.offset_notes,
             lambda rel, pos: f"offset: {base + rel} position: {pos}",
             lambda rel, pos: f"offset {base + rel}, position {pos}"),
            (TIMEINDEX_SUFFIX, 16, check.times, check.time_notes,
             lambda ts, rel: f"timestamp: {ts} offset: {base + rel}",
             lambda ts, rel: f"timestamp {ts}, offset {base + rel}"),
        ]
        problems = []
        for suffix, entry_size, entries, notes, line, name in sections:
            if show not in (None, suffix):
                continue
            path = target.log.with_suffix(suffix)
            self.out.write(f"Dumping {path} ({len(entries)} entries)\n")
            for slot, ((key, value), note) in enumerate(zip(entries.tolist(), notes)):
                self.out.write(line(key, value) + (f"  <- MISMATCH: {note}" if note else "") + "\n")
                if note:
                    problems.append(f"{path}: bad index entry at position {slot * entry_size}: "
                                    f"entry {slot} ({name(key, value)}): {note}")
        if problems:
            more = f" ({len(problems)} bad entries in all)" if len(problems) > 1 else ""
            raise CommandError(problems[0] + more)

    def print_summary(self) -> None:
        t = self.totals
        for note in t.notes:
            self.out.write(f"Note: {note}\n")
        self.out.write(
            f"Summary: {t.files} {'file' if t.files == 1 else 'files'}, {t.batches} batches, "
            f"{t.records} records, {t.bytes} bytes\n"
        )


def _marker(batch) -> str:
    """What a control batch says, as Kafka's DumpLogSegments shows it (empty for other batches)."""
    if not batch.header.is_control:
        return ""
    try:
        marker = records.read_end_txn_marker(batch.buf, batch.at)
    except CorruptMessage as exc:
        return f" endTxnMarker: unreadable ({exc})"
    if marker is None:
        return " controlType: unknown"
    return f" endTxnMarker: {'COMMIT' if marker.commit else 'ABORT'} coordinatorEpoch: {marker.coordinator_epoch}"


def format_batch(position: int, h: records.BatchHeader, crc_ok: bool) -> str:
    flags = [name for bit, name in ((records.TRANSACTIONAL_BIT, "transactional"), (records.CONTROL_BIT, "control"),
                                    (records.TIMESTAMP_TYPE_BIT, "LogAppendTime"),
                                    (records.DELETE_HORIZON_BIT, "deleteHorizon")) if h.attributes & bit]
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"position: {position} size: {h.size} baseTimestamp: {h.base_timestamp} maxTimestamp: {h.max_timestamp} "
        f"compression: {CODECS.get(h.compression, h.compression)} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} baseSequence: {h.base_sequence} "
        f"leaderEpoch: {h.partition_leader_epoch} crc: {h.crc:#010x} {'ok' if crc_ok else 'BAD'}"
        + (f" flags: {','.join(flags)}" if flags else "")
    )


def show_bytes(data: bytes | None, width: int) -> str:
    """A key or value: "text" if it is printable UTF-8, else 0x-hex; cut to `width` characters."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        return show_text(text, width)
    shown = data[: max((width - 2) // 2, 1)].hex()
    return "0x" + shown + (f"...(+{len(data) - len(shown) // 2} bytes)" if len(shown) // 2 < len(data) else "")


def show_text(text: str | None, width: int) -> str:
    if text is None:
        return "null"
    if len(text) <= width:
        return f'"{text}"'
    return f'"{text[:width]}"...(+{len(text) - width} chars)'
