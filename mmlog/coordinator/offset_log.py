"""The embedded offset store: `__consumer_offsets.log`, an append-only journal of CRC-checked frames.

A standalone broker keeps its committed offsets in its first data directory, in
one file that only the control thread of the main process opens.

Layout
------
The file is frames back to back, with no header. All integers big-endian.

    offset  size  field
    0       4     length    uint32: bytes after this field (4 + the records)
    4       4     crc       uint32: CRC-32C (Castagnoli) of the records
    8       ...   records   one or more, back to back

A frame is the unit of atomicity: one OffsetCommit request (all its partitions),
one topic deletion, one expiry round. Each record opens with a type byte; str16
is a uint16 byte count and UTF-8, str32 the same with a uint32 count:

    type 1 OffsetCommit  group str16, topic str16, partition int32, offset int64,
                         leader_epoch int32, commit_ms int64, metadata str32
    type 2 OffsetDelete  group str16, topic str16, partition int32
    type 3 TopicDelete   topic str16
    type 4 GroupMeta     group str16, protocol_type str16, generation int32
    type 5 GroupDelete   group str16
    type 6 TxnOffsetCommit  producer_id int64, then a whole type 1 record (type byte included)
    type 7 TxnOffsetEnd  group str16, producer_id int64, commit int8

Reading folds the records of every valid frame into an `OffsetTable` in file
order, so a later record wins (a commit after a TopicDelete of a re-created
topic survives it).

Invariants: the file is a sequence of whole, valid frames, except possibly a
torn or garbage tail that the next `load` truncates; nothing else writes it.

Writes and crash behaviour
--------------------------
`write` appends one frame with a single `os.write`, and a commit is acknowledged
only after that. The journal obeys the broker's flush settings as Kafka's
`__consumer_offsets` does, so a commit is exactly as durable as a produced record:
a broker crash (SIGKILL at any point) loses nothing acknowledged, the kernel
writes the page cache out; a machine crash (power loss) loses only what was not
yet fsynced: once `log.flush.interval.messages` records are unsynced, `write`
fsyncs before it acknowledges (1: every commit is on disk when acknowledged),
and `flush_due` fsyncs records older than `log.flush.interval.ms` from the
control thread's flush timer; `close` fsyncs.

- Killed during the write: the frame is short or its CRC fails. `load` stops at
  the first frame whose length runs past the end, whose length is below 4 or
  above `MAX_FRAME`, whose CRC does not match, or whose records do not parse,
  and truncates the file there. That frame was never acknowledged; every frame
  before it is whole. (A flipped byte in the middle of the file would also end
  the valid prefix there: what follows cannot be trusted to be in order.)
- A short write without a crash (disk full): the file is truncated back to the
  frame's start and the writer gets the error, so no torn frame sits in front of
  later ones.

Compaction
----------
Every frame stays until a compaction rewrites the live state: when the file has
grown past `COMPACT_MIN_BYTES` and holds more than twice the live bytes. A
rewrite costs the live size and happens only after at least that much was
appended since the last one, so each appended byte pays for at most one
rewritten byte: no quadratic cost. Steps:

1. write the table's records to `__consumer_offsets.log.compacting`, fsync it;
2. rename it over `__consumer_offsets.log`, fsync the directory;
3. reopen the append descriptor.

Killed before 2: a stale `.compacting` file, removed by `load`; the old file is
whole. Killed after 2: the new file is whole (fsynced before the rename) and
holds every live record. `load` compacts too, when the file it read is mostly
dead.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from crc32c import crc32c

from mmlog.coordinator.offsets import (
    Done,
    GroupDelete,
    GroupMeta,
    OffsetCommit,
    OffsetDelete,
    OffsetStore,
    Record,
    TopicDelete,
    TxnOffsetCommit,
    TxnOffsetEnd,
)
from mmlog.system.files import fsync_dir

log = logging.getLogger(__name__)

FILE_NAME = "__consumer_offsets.log"
COMPACTING_SUFFIX = ".compacting"
MAX_FRAME = 64 << 20  # a frame above this is garbage: no request carries that many commits
COMPACT_MIN_BYTES = 8 << 20  # below this a rewrite is not worth it, however much is dead
REWRITE_FRAME_BYTES = 1 << 20  # a compaction writes frames of about 1 MiB

_FRAME = struct.Struct(">II")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_OFFSET_TAIL = struct.Struct(">iqiq")  # partition, offset, leader_epoch, commit_ms
_I32 = struct.Struct(">i")

T_OFFSET, T_OFFSET_DELETE, T_TOPIC_DELETE, T_GROUP, T_GROUP_DELETE, T_TXN_OFFSET, T_TXN_END = 1, 2, 3, 4, 5, 6, 7
_PID = struct.Struct(">q")
_PID_RESULT = struct.Struct(">qb")


class CorruptFrame(ValueError):
    """Records that do not parse (a torn or foreign tail)."""


class FrameTooLarge(ValueError):
    """Records that would make a frame above MAX_FRAME (Kafka answers INVALID_COMMIT_OFFSET_SIZE)."""


# ---------------------------------------------------------------- encoding

def _str16(out: bytearray, text: str) -> None:
    data = text.encode()
    if len(data) > 0xFFFF:
        raise ValueError(f"{len(data)}-byte name does not fit a str16")
    out += _U16.pack(len(data))
    out += data


def encode_record(out: bytearray, r: Record) -> None:
    """Append one record's bytes."""
    if isinstance(r, TxnOffsetCommit):  # the producer id, then an OffsetCommit's fields
        out.append(T_TXN_OFFSET)
        out += _PID.pack(r.producer_id)
        encode_record(out, OffsetCommit(r.group, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata,
                                        r.commit_ms))
    elif isinstance(r, TxnOffsetEnd):
        out.append(T_TXN_END)
        _str16(out, r.group)
        out += _PID_RESULT.pack(r.producer_id, int(r.commit))
    elif isinstance(r, OffsetCommit):
        out.append(T_OFFSET)
        _str16(out, r.group)
        _str16(out, r.topic)
        out += _OFFSET_TAIL.pack(r.partition, r.offset, r.leader_epoch, r.commit_ms)
        data = r.metadata.encode()
        out += _U32.pack(len(data))
        out += data
    elif isinstance(r, OffsetDelete):
        out.append(T_OFFSET_DELETE)
        _str16(out, r.group)
        _str16(out, r.topic)
        out += _I32.pack(r.partition)
    elif isinstance(r, TopicDelete):
        out.append(T_TOPIC_DELETE)
        _str16(out, r.topic)
    elif isinstance(r, GroupMeta):
        out.append(T_GROUP)
        _str16(out, r.group)
        _str16(out, r.protocol_type)
        out += _I32.pack(r.generation)
    elif isinstance(r, GroupDelete):
        out.append(T_GROUP_DELETE)
        _str16(out, r.group)
    else:
        raise TypeError(f"not an offset record: {r!r}")


def encode_frame(records: Iterable[Record]) -> bytes:
    """One frame holding the records."""
    body = bytearray()
    for r in records:
        encode_record(body, r)
    if 4 + len(body) > MAX_FRAME:
        raise FrameTooLarge(f"{len(body)} bytes of records exceed the {MAX_FRAME}-byte frame limit")
    return _FRAME.pack(4 + len(body), crc32c(body)) + body


def decode_records(body: memoryview) -> list[Record]:
    """The records of one frame body; CorruptFrame if they do not parse exactly."""
    out: list[Record] = []
    pos, end = 0, len(body)

    def str16() -> str:
        nonlocal pos
        (n,) = _U16.unpack_from(body, pos)
        pos += 2
        if pos + n > end:
            raise CorruptFrame("string runs past the frame")
        text = bytes(body[pos:pos + n]).decode()
        pos += n
        return text

    try:
        while pos < end:
            kind = body[pos]
            pos += 1
            pid = None
            if kind == T_TXN_OFFSET:
                (pid,) = _PID.unpack_from(body, pos)
                pos += _PID.size
                if pos >= end or body[pos] != T_OFFSET:
                    raise CorruptFrame("a transactional offset without its offset record")
                kind = body[pos]
                pos += 1
            if kind == T_TXN_END:
                group = str16()
                pid, commit = _PID_RESULT.unpack_from(body, pos)
                pos += _PID_RESULT.size
                out.append(TxnOffsetEnd(group, pid, bool(commit)))
            elif kind == T_OFFSET:
                group, topic = str16(), str16()
                partition, offset, epoch, commit_ms = _OFFSET_TAIL.unpack_from(body, pos)
                pos += _OFFSET_TAIL.size
                (n,) = _U32.unpack_from(body, pos)
                pos += 4
                if pos + n > end:
                    raise CorruptFrame("metadata runs past the frame")
                metadata = bytes(body[pos:pos + n]).decode()
                pos += n
                if pid is None:
                    out.append(OffsetCommit(group, topic, partition, offset, epoch, metadata, commit_ms))
                else:
                    out.append(TxnOffsetCommit(group, pid, topic, partition, offset, epoch, metadata, commit_ms))
            elif kind == T_OFFSET_DELETE:
                group, topic = str16(), str16()
                (partition,) = _I32.unpack_from(body, pos)
                pos += 4
                out.append(OffsetDelete(group, topic, partition))
            elif kind == T_TOPIC_DELETE:
                out.append(TopicDelete(str16()))
            elif kind == T_GROUP:
                group, protocol_type = str16(), str16()
                (generation,) = _I32.unpack_from(body, pos)
                pos += 4
                out.append(GroupMeta(group, protocol_type, generation))
            elif kind == T_GROUP_DELETE:
                out.append(GroupDelete(str16()))
            else:
                raise CorruptFrame(f"unknown record type {kind}")
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptFrame(str(exc)) from exc
    return out


def read_frames(data: memoryview) -> tuple[list[list[Record]], int, str]:
    """The valid frames at the start of data, the byte count they cover, and why reading stopped."""
    frames: list[list[Record]] = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < _FRAME.size:
            return frames, pos, f"torn frame header at byte {pos}"
        length, crc = _FRAME.unpack_from(data, pos)
        if length < 4 or length > MAX_FRAME:
            return frames, pos, f"bad frame length {length} at byte {pos}"
        stop = pos + 4 + length
        if stop > end:
            return frames, pos, f"frame at byte {pos} runs {stop - end} bytes past the end"
        body = data[pos + _FRAME.size:stop]
        if crc32c(body) != crc:
            return frames, pos, f"CRC mismatch in the frame at byte {pos}"
        try:
            frames.append(decode_records(body))
        except CorruptFrame as exc:
            return frames, pos, f"unreadable frame at byte {pos}: {exc}"
        pos = stop
    return frames, pos, ""


# ---------------------------------------------------------------- the store

class OffsetLog(OffsetStore):
    """Committed offsets in `<data dir>/__consumer_offsets.log` (see the module docstring)."""

    def __init__(self, directory: Path, compact_min_bytes: int = COMPACT_MIN_BYTES,
                 flush_messages: int = 2**63 - 1) -> None:
        """flush_messages: log.flush.interval.messages, the unsynced records after which `write` fsyncs."""
        super().__init__()
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME
        self.compact_min_bytes = compact_min_bytes
        self.flush_messages = flush_messages
        self.size = 0
        self._fd = -1
        self._unflushed_since: float | None = None  # monotonic time of the oldest write not fsynced
        self._unflushed = 0  # records written and not fsynced

    # ------------------------------------------------------------ start-up

    def load(self) -> list[str]:
        """Read the file into the table, truncate an invalid tail, compact a mostly dead file."""
        notes = []
        self.dir.mkdir(parents=True, exist_ok=True)
        stale = self.path.with_name(FILE_NAME + COMPACTING_SUFFIX)
        if stale.exists():
            stale.unlink()
            notes.append(f"{stale.name}: removed an interrupted compaction")
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if created:  # its name must be on disk before any commit fsynced into it counts as durable
            fsync_dir(self.dir)
        data = _read_all(self._fd)
        frames, valid, why = read_frames(memoryview(data))
        for records in frames:
            for r in records:
                self.table.apply(r)
        if valid < len(data):
            os.ftruncate(self._fd, valid)
            os.fsync(self._fd)
            notes.append(f"{self.path.name}: {why}; truncated {len(data) - valid} bytes at {valid}")
        self.size = valid
        if self._compaction_due():
            self.compact()
            notes.append(f"{self.path.name}: compacted {valid} bytes to {self.size}")
        return notes

    # ------------------------------------------------------------ writes

    def write(self, records: Sequence[Record], done: Done) -> None:
        if not records:
            done(None)
            return
        start = self.size
        try:
            self._append(encode_frame(records))
            self._unflushed += len(records)
            if self._unflushed >= self.flush_messages:
                self.flush()  # before the acknowledgement: flush.messages=1 means every commit is on disk
        except (OSError, ValueError) as exc:
            if self.size != start:  # the fsync failed: what reached the disk is unknown, so take it back
                self._truncate_to(start)
                self.size = start
            done(exc)
            return
        for r in records:
            self.table.apply(r)
        done(None)
        if self._compaction_due():
            try:
                self.compact()
            except OSError:
                log.exception("compacting %s failed; the journal keeps growing until the next try", self.path)

    def _append(self, frame: bytes) -> None:
        start = self.size
        try:
            written = os.write(self._fd, frame)
        except OSError:
            self._truncate_to(start)
            raise
        if written != len(frame):
            self._truncate_to(start)
            raise OSError(f"short write to {self.path}: {written} of {len(frame)} bytes")
        self.size = start + written
        if self._unflushed_since is None:
            self._unflushed_since = time.monotonic()

    def _truncate_to(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            log.exception("cannot truncate %s back to %d bytes; load() will", self.path, size)

    # ------------------------------------------------------------ compaction

    def _compaction_due(self) -> bool:
        return self.size >= self.compact_min_bytes and self.size > 2 * self.table.live_bytes

    def compact(self) -> None:
        """Rewrite the file as the table's live records (steps and crash points in the docstring)."""
        tmp = self.path.with_name(FILE_NAME + COMPACTING_SUFFIX)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        size = 0
        try:
            for frame in _frames_of(self.table.records()):
                size += _write_all(fd, frame)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.dir)
        old, self._fd = self._fd, os.open(self.path, os.O_RDWR | os.O_APPEND)
        os.close(old)
        log.info("compacted %s from %d to %d bytes", self.path.name, self.size, size)
        self.size = size
        self._unflushed_since = None
        self._unflushed = 0

    # ------------------------------------------------------------ flush and close

    def flush_due(self, interval_ms: int) -> None:
        since = self._unflushed_since
        if since is not None and (time.monotonic() - since) * 1000 >= interval_ms:
            self.flush()

    def flush(self) -> None:
        if self._fd >= 0 and self._unflushed_since is not None:
            os.fsync(self._fd)
            self._unflushed_since = None
            self._unflushed = 0

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1


def _frames_of(records: Iterator[Record]) -> Iterator[bytes]:
    """Frames of about REWRITE_FRAME_BYTES each."""
    batch: list[Record] = []
    size = 0
    for r in records:
        batch.append(r)
        size += 64 + len(getattr(r, "metadata", ""))  # rough, but a frame stays far below MAX_FRAME
        if size >= REWRITE_FRAME_BYTES:
            yield encode_frame(batch)
            batch, size = [], 0
    if batch:
        yield encode_frame(batch)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(size - pos, 16 << 20), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    return len(data)
