"""Record batch v2 (magic 2): build, validate, inspect, and patch in place.

Byte layout of a batch (big-endian, `DefaultRecordBatch.java`)::

    0  baseOffset            int64   rewritten by the broker; outside the CRC
    8  batchLength           int32   bytes after this field (= total size - 12)
   12  partitionLeaderEpoch  int32   outside the CRC
   16  magic                 int8    must be 2
   17  crc                   uint32  CRC-32C of bytes 21 .. end
   21  attributes            int16   bits 0-2 compression, 3 timestampType,
                                     4 transactional, 5 control
   23  lastOffsetDelta       int32   next offset = baseOffset + lastOffsetDelta + 1
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records ...                   (one compressed stream if compression != 0)

Each record: length, attributes (int8), timestampDelta, offsetDelta, keyLength,
key, valueLength, value, headerCount, then per header keyLength, key, valueLength,
value. Every integer except attributes is a zigzag varint; -1 lengths mean null.

Because the CRC does not cover baseOffset (nor the leader epoch), the broker
assigns offsets by overwriting bytes 0-7 and stores and serves the batch bytes
unchanged otherwise.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Sequence

from crc32c import crc32c

from mmlog.errors import CorruptMessage, InvalidRecord
from mmlog.protocol import compression as compression_codecs

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch batchLength leaves out
CRC_START = 21

BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40  # KIP-534: the log cleaner set the base timestamp to the batch's delete horizon

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0


_make_header = BatchHeader._make


@dataclass(slots=True)
class Record:
    """One record as an application sees it."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None
    offset: int = -1


# ---------------------------------------------------------------- varints


def zigzag_encode(n: int) -> int:
    """Map a signed 64-bit int to an unsigned one (0,-1,1,-2,... -> 0,1,2,3,...)."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def write_varint(out: bytearray, n: int) -> None:
    """Append a zigzag base-128 varint (the encoding record fields use)."""
    u = zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at pos; return (value, next position)."""
    shift = 0
    u = 0
    while True:
        if pos >= len(buf):
            raise CorruptMessage("truncated varint")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            return zigzag_decode(u), pos
        shift += 7
        if shift > 63:
            raise CorruptMessage("varint longer than 10 bytes")


def _write_nullable(out: bytearray, data: bytes | str | None) -> None:
    if data is None:
        write_varint(out, -1)
        return
    if isinstance(data, str):
        data = data.encode()
    write_varint(out, len(data))
    out += data


def _read_nullable(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptMessage("record field runs past the batch")
    return bytes(buf[pos : pos + n]), pos + n


# ---------------------------------------------------------------- building


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> None:
    """Append one record (length-prefixed) to out."""
    body = bytearray()
    body.append(0)  # record attributes: unused
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_nullable(body, key)
    _write_nullable(body, value)
    write_varint(body, len(headers))
    for hkey, hvalue in headers:
        _write_nullable(body, hkey)
        _write_nullable(body, hvalue)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[Record | tuple],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    compression: int = 0,
    transactional: bool = False,
) -> bytearray:
    """Build one v2 batch from records (Record objects or (key, value[, headers]) tuples).

    Records without a timestamp get the batch's base timestamp (now, by default).
    `compression` is a codec id (compression.py: 1 gzip, 2 snappy, 3 lz4, 4 zstd);
    `transactional` sets attribute bit 4 (a transactional producer's batch).
    """
    recs = [r if isinstance(r, Record) else Record(r[1], r[0], list(r[2]) if len(r) > 2 else []) for r in records]
    if not recs:
        raise ValueError("a batch holds at least one record")
    now = int(time.time() * 1000)
    stamps = [r.timestamp for r in recs]
    if base_timestamp is None:
        known = [t for t in stamps if t is not None]
        base_timestamp = min(known) if known else now
    stamps = [base_timestamp if t is None else t for t in stamps]
    body = bytearray()
    for i, (r, ts) in enumerate(zip(recs, stamps)):
        encode_record(body, i, ts - base_timestamp, r.key, r.value, r.headers)
    if compression:
        if compression not in compression_codecs.NAMES:
            raise ValueError(f"unknown compression codec {compression}")
        body = compression_codecs.compress(compression, bytes(body))
    return _assemble(
        body,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=compression | (TRANSACTIONAL_BIT if transactional else 0),
        last_offset_delta=len(recs) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(stamps),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(recs),
    )


# ---------------------------------------------------------------- transaction markers
#
# A transaction marker is a control batch (attributes: transactional | control) of one
# record, written by a partition leader when the transaction coordinator ends a
# transaction (`ControlRecordType.java`, `EndTransactionMarker.java`):
#   key   = version int16 (0), type int16 (0 abort, 1 commit)
#   value = version int16 (0), coordinator epoch int32
# Its producer id and epoch are the transaction's; its base sequence is -1.

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    """What a transaction marker says: commit or abort, and by which coordinator epoch."""

    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                         timestamp: int | None = None, base_offset: int = 0,
                         partition_leader_epoch: int = -1) -> bytearray:
    """The control batch that ends producer_id's transaction on a partition."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    body = bytearray()
    encode_record(body, 0, 0, _CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
                  _MARKER_VALUE.pack(0, coordinator_epoch))
    return _assemble(body, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                     attributes=TRANSACTIONAL_BIT | CONTROL_BIT, last_offset_delta=0, base_timestamp=ts,
                     max_timestamp=ts, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                     records_count=1)


def read_end_txn_marker(buf, pos: int = 0) -> EndTxnMarker | None:
    """The marker in the control batch at pos; None for a control batch that is not a transaction
    marker (another control type, or no record left). CorruptMessage if its record does not parse."""
    h = read_header(buf, pos)
    if not h.records_count:
        return None
    body = memoryview(buf)[pos + HEADER_SIZE: pos + h.size]
    data = decompress(h.compression, body) if h.compression else body
    try:
        _, p = read_varint(data, 0)  # record length
        p += 1  # attributes
        _, p = read_varint(data, p)  # timestamp delta
        _, p = read_varint(data, p)  # offset delta
        key, p = _read_nullable(data, p)
        value, p = _read_nullable(data, p)
        if key is None or len(key) < 4:
            raise CorruptMessage("control record without a key")
        _, kind = _CONTROL_KEY.unpack_from(key)
        if kind not in (ABORT, COMMIT):
            return None
        if value is None or len(value) < 6:
            raise CorruptMessage("transaction marker without its value")
        _, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    except (IndexError, struct.error) as exc:
        raise CorruptMessage(f"unreadable control record: {exc}") from None
    return EndTxnMarker(kind == COMMIT, coordinator_epoch)


def _assemble(body: bytes | bytearray, **h) -> bytearray:
    """Prefix a records body with the 61-byte header and fill in length and CRC."""
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out, 0, h["base_offset"], HEADER_SIZE - LOG_OVERHEAD + len(body), h["partition_leader_epoch"],
        MAGIC, 0, h["attributes"], h["last_offset_delta"], h["base_timestamp"], h["max_timestamp"],
        h["producer_id"], h["producer_epoch"], h["base_sequence"], h["records_count"],
    )
    out += body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return out


# ---------------------------------------------------------------- inspecting


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at pos (no validation beyond having the bytes)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptMessage(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    return _make_header(_HEADER.unpack_from(buf, pos))


def validate_batch(buf, pos: int = 0, dense: bool = True) -> BatchHeader:
    """Check length, magic and CRC-32C of the batch at pos; return its header.

    Raises CorruptMessage for a bad length, magic or CRC (what Kafka answers for
    a corrupt produce), InvalidRecord for a header whose counts make no sense.
    """
    avail = len(buf) - pos
    if avail < LOG_OVERHEAD:
        raise CorruptMessage(f"batch at {pos} truncated: {avail} bytes")
    if avail >= HEADER_SIZE:  # the whole header at once: one unpack (the length is its second field)
        fields = _HEADER.unpack_from(buf, pos)
        length = fields[1]
    else:
        (length,), fields = _I32.unpack_from(buf, pos + BATCH_LENGTH), None
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptMessage(f"batch at {pos}: length {length} below the header size")
    if length + LOG_OVERHEAD > avail:
        raise CorruptMessage(f"batch at {pos}: length {length} runs past the {avail} bytes given")
    header = _make_header(fields)  # avail >= length + LOG_OVERHEAD >= HEADER_SIZE: fields were read
    if header.magic != MAGIC:
        raise CorruptMessage(f"batch at {pos}: magic {header.magic}, only magic 2 is supported")
    actual = crc32c(memoryview(buf)[pos + CRC_START : pos + LOG_OVERHEAD + length])
    if actual != header.crc:
        raise CorruptMessage(f"batch at {pos}: CRC-32C {actual:#010x} != stored {header.crc:#010x}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidRecord(f"batch at {pos}: negative lastOffsetDelta or recordsCount")
    if dense and not header.attributes & COMPRESSION_MASK and header.records_count != header.last_offset_delta + 1:
        # Compaction may leave gaps in a stored batch, but a producer's batch is dense.
        raise InvalidRecord(
            f"batch at {pos}: {header.records_count} records but lastOffsetDelta {header.last_offset_delta}"
        )
    return header


def validate_batches(buf, dense: bool = True) -> list[BatchHeader]:
    """Validate a buffer holding one or more whole batches back to back (`dense=False`: stored batches,
    which compaction may have left with fewer records than offsets, as a follower copies them)."""
    headers = []
    pos = 0
    while pos < len(buf):
        h = validate_batch(buf, pos, dense)
        headers.append(h)
        pos += h.size
    if not headers:
        raise CorruptMessage("no record batch in the records field")
    return headers


def validate_whole_batches(buf, dense: bool = True) -> tuple[list[BatchHeader], int]:
    """Validate the whole batches at the start of buf and return (their headers, the bytes they span):
    a fetched records field may end in part of a batch, which is left out (as `iter_batches` stops)."""
    headers = []
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH)
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > end:
            break
        h = validate_batch(buf, pos, dense)
        headers.append(h)
        pos += LOG_OVERHEAD + length
    return headers, pos


def set_base_offset(buf, base_offset: int, pos: int = 0) -> None:
    """Overwrite baseOffset of the batch at pos (outside the CRC, so the CRC stays valid)."""
    _I64.pack_into(buf, pos + BASE_OFFSET, base_offset)


def set_leader_epoch(buf, epoch: int, pos: int = 0) -> None:
    """Overwrite partitionLeaderEpoch of the batch at pos (outside the CRC, like baseOffset)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH, epoch)


_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence: contiguous at PRODUCER_ID


def set_producer(buf, producer_id: int, producer_epoch: int, base_sequence: int, pos: int = 0, *,
                 transactional: bool = False) -> None:
    """Stamp an idempotent producer's id, epoch and first sequence into the batch at pos, and the
    transactional bit if asked (inside the CRC, which is computed again: a client does this once,
    when the batch is first sent)."""
    _PRODUCER.pack_into(buf, pos + PRODUCER_ID, producer_id, producer_epoch, base_sequence)
    if transactional:
        (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES)
        _I16.pack_into(buf, pos + ATTRIBUTES, attributes | TRANSACTIONAL_BIT)
    (length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH)
    struct.pack_into(">I", buf, pos + CRC_OFFSET,
                     crc32c(memoryview(buf)[pos + CRC_START: pos + LOG_OVERHEAD + length]))


def iter_batches(buf, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch; stop at a partial tail."""
    while len(buf) - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH)
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > len(buf):
            return
        yield pos, read_header(buf, pos)
        pos += LOG_OVERHEAD + length


# ---------------------------------------------------------------- decoding


# Decompressed records kept at most (a client's guard against a decompression bomb; the broker's
# own limit is a multiple of max.message.bytes).
DECOMPRESSED_LIMIT = 256 << 20


def decompress(codec: int, data, limit: int = DECOMPRESSED_LIMIT) -> bytes:
    """A batch's records section decompressed (compression.py has the codecs and their framing)."""
    return bytes(compression_codecs.decompress(codec, data, limit))


def decode_records(buf, pos: int = 0) -> list[Record]:
    """Decode every record of the batch at pos into Record objects (offsets and timestamps absolute)."""
    h = read_header(buf, pos)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    data = decompress(h.compression, body) if h.compression else body
    out: list[Record] = []
    p = 0
    for _ in range(h.records_count):
        length, p = read_varint(data, p)
        end = p + length
        if end > len(data):
            raise CorruptMessage("record runs past its batch")
        p += 1  # record attributes
        ts_delta, p = read_varint(data, p)
        off_delta, p = read_varint(data, p)
        key, p = _read_nullable(data, p)
        value, p = _read_nullable(data, p)
        nheaders, p = read_varint(data, p)
        headers = []
        for _ in range(nheaders):
            hk, p = _read_nullable(data, p)
            hv, p = _read_nullable(data, p)
            headers.append((hk.decode() if hk is not None else None, hv))
        if p != end:
            raise CorruptMessage("record length disagrees with its fields")
        timestamp = h.max_timestamp if h.timestamp_type else h.base_timestamp + ts_delta
        out.append(Record(value, key, headers, timestamp, h.base_offset + off_delta))
    return out
