"""Compressed batches on append: their records checked, and recompressed to the topic's codec.

A produced batch's CRC covers its compressed bytes, not what they decompress to, so
the broker decompresses every compressed batch (as Kafka's LogValidator does) and
walks its records with a numba kernel (`kernels.check_records`): the record count
and the offset deltas must agree with the header. A batch that fails is
CORRUPT_MESSAGE and nothing of its request is appended.

Decompression is bounded by DECOMPRESSION_FACTOR x max.message.bytes (64 MiB with
the default): a batch whose records expand past that (a decompression bomb) is
refused before more memory is touched (see protocol/compression.py).

`compression.type` (topic, default from the broker's): `producer` keeps the
client's bytes, the zero-copy path; a codec name (or `uncompressed`) makes every
batch of another codec be rewritten in that one, its header fields kept and its
CRC redone.
"""

from __future__ import annotations

import numpy as np

from mmlog.errors import CorruptMessage, InvalidRecord
from mmlog.log import kernels
from mmlog.protocol import compression, records

DECOMPRESSION_FACTOR = 64


def check_keys(buf, headers: list, max_message_bytes: int) -> None:
    """A compacted topic takes only records with keys (Kafka's LogValidator): INVALID_RECORD otherwise.
    Control batches (transaction markers) are not records of the topic and pass."""
    pos = 0
    for h in headers:
        if not h.is_control:
            batch = memoryview(buf)[pos + records.HEADER_SIZE: pos + h.size]
            codec = h.attributes & 0x07
            body = compression.decompress(codec, batch, DECOMPRESSION_FACTOR * max_message_bytes) if codec else batch
            data = np.frombuffer(body, dtype=np.uint8)
            if kernels.first_null_key(data, len(data), h.records_count) >= 0:
                raise InvalidRecord("Compacted topic cannot accept message without key")
        pos += h.size


def prepare(buf, headers: list, compression_type: str, level: int | None, max_message_bytes: int):
    """(buf, headers) to append: compressed batches checked, and recompressed if the topic asks.

    Returns the same objects when nothing changes (the common case costs one loop over headers).
    """
    target = None if compression_type == "producer" else compression.codec_of(compression_type)
    if target is None and not (headers[0].attributes & 0x07 if len(headers) == 1 else
                               any(h.attributes & 0x07 for h in headers)):
        return buf, headers
    limit = DECOMPRESSION_FACTOR * max_message_bytes
    rebuilt = []
    pos = 0
    changed = False
    for h in headers:
        batch = memoryview(buf)[pos : pos + h.size]
        codec = h.attributes & 0x07
        if codec:
            body = compression.decompress(codec, batch[records.HEADER_SIZE:], limit)
            status, walked = kernels.check_records(np.frombuffer(body, dtype=np.uint8), len(body), h.records_count)
            if status != kernels.RECORDS_OK or h.last_offset_delta != h.records_count - 1:
                raise CorruptMessage(f"{compression.NAMES[codec]} batch at offset delta {walked}: "
                                     f"{kernels.RECORDS_REASONS[status] if status else 'lastOffsetDelta != records - 1'}")
        if target is not None and codec != target:
            plain = compression.decompress_batch(batch, limit) if codec else batch
            batch = compression.compress_batch(plain, target, level) if target else bytearray(plain)
            changed = True
        rebuilt.append(batch)
        pos += h.size
    if not changed:
        return buf, headers
    out = bytearray(b"".join(rebuilt))
    return out, records.validate_batches(out)
