"""Kafka's four record-batch codecs, with Kafka's framing, through one dependency (cramjam).

A compressed v2 batch keeps its 61-byte header as is and holds, after it, the
records section compressed as one stream; attributes bits 0-2 name the codec:

    1 gzip     RFC 1952 gzip members (zlib)
    2 snappy   xerial framing, as the Java client writes it and librdkafka and kafka-python
               read it: magic 82 'SNAPPY' 00, int32 version 1, int32 compatible 1, then
               blocks of (int32 compressed length, raw snappy of up to 32 KiB). Reading also
               takes plain raw snappy, which some clients write.
    3 lz4      the LZ4 frame format (KIP-57)
    4 zstd     a zstd frame

Decompression is bounded: `decompress` never produces more than `limit` bytes and
refuses a stream that would (a decompression bomb), writing into one scratch buffer
per process that the kernel only backs with pages as they are written.

`compress_batch` / `decompress_batch` turn a whole batch from one form into the
other: the header's fields are kept, its length, codec bits and CRC-32C redone.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import numpy as np
from crc32c import crc32c

from mmlog.errors import CorruptMessage

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = {"none": NONE, "uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# compression.level: (lowest, highest, a client's default) where the codec has levels (Kafka's KIP-390
# ranges). lz4's default is its fast mode, as librdkafka's: 4 ms for 2.8 MB of JSON events where level 9
# (the broker's compression.lz4.level default, for recompression) takes 48 ms for a 7% smaller result.
LEVELS = {GZIP: (1, 9, 6), LZ4: (1, 17, 1), ZSTD: (-131072, 22, 3)}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")
_CRC = struct.Struct(">I")

# Batch header positions (records.py has the whole layout).
_BATCH_LENGTH, _ATTRIBUTES, _CRC_AT, _CRC_START, HEADER_SIZE, LOG_OVERHEAD = 8, 21, 17, 21, 61, 12


class DecompressionBomb(CorruptMessage):
    """A batch whose records expand past the limit."""


def codec_of(name: str) -> int:
    """The codec id of a name (`none`, `gzip`, `snappy`, `lz4`, `zstd`); ValueError otherwise."""
    try:
        return CODECS[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"unknown compression type {name!r} (none, gzip, snappy, lz4 or zstd)") from None


def check_level(codec: int, level: int | None) -> int | None:
    """A compression level valid for the codec (None: its default); ValueError otherwise."""
    if level is None:
        return None
    if codec not in LEVELS:
        raise ValueError(f"{NAMES[codec]} has no compression levels")
    low, high, _ = LEVELS[codec]
    if not low <= level <= high:
        raise ValueError(f"{NAMES[codec]} compression level {level} outside {low}..{high}")
    return level


# ---------------------------------------------------------------- streams


def compress(codec: int, data, level: int | None = None) -> bytes:
    """The records section `data` compressed with `codec` in Kafka's framing."""
    if codec == GZIP:
        z = zlib.compressobj(LEVELS[GZIP][2] if level is None else level, zlib.DEFLATED, 31)
        return z.compress(data) + z.flush()
    if codec == SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK]))
            parts += [_I32.pack(len(block)), block]
        return b"".join(parts)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data, LEVELS[LZ4][2] if level is None else level))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, LEVELS[ZSTD][2] if level is None else level))
    if codec == NONE:
        return bytes(data)
    raise CorruptMessage(f"unknown compression codec {codec}")


class _Scratch:
    """One output buffer per process, grown to the largest limit asked for (pages untouched until written)."""

    buf = np.empty(0, dtype=np.uint8)

    @classmethod
    def get(cls, size: int) -> np.ndarray:
        if len(cls.buf) < size:
            cls.buf = np.empty(size, dtype=np.uint8)
        return cls.buf


def decompress(codec: int, data, limit: int) -> memoryview:
    """The records section of a `codec` stream, at most `limit` bytes.

    Returns a view of this process's scratch buffer, valid until the next call.
    CorruptMessage if the stream is damaged, DecompressionBomb if it expands past limit.
    """
    out = _Scratch.get(limit + 1)
    try:
        if codec == GZIP:
            n = _gunzip_into(data, out, limit)
        elif codec == SNAPPY:
            n = _unsnappy_into(memoryview(data), out, limit)
        elif codec == LZ4:
            n = cramjam.lz4.decompress_into(data, out[: limit + 1])
        elif codec == ZSTD:
            n = cramjam.zstd.decompress_into(data, out[: limit + 1])
        elif codec == NONE:
            return memoryview(data)
        else:
            raise CorruptMessage(f"unknown compression codec {codec}")
    except cramjam.DecompressionError as exc:
        if "whole buffer" in str(exc):
            raise DecompressionBomb(f"{NAMES[codec]} records expand past {limit:,} bytes") from None
        raise CorruptMessage(f"{NAMES[codec]} records do not decompress: {exc}") from None
    if n > limit:
        raise DecompressionBomb(f"{NAMES[codec]} records expand past {limit:,} bytes")
    return memoryview(out)[:n]


def _gunzip_into(data, out: np.ndarray, limit: int) -> int:
    """gzip members into out, refusing more than limit bytes; zlib's max_length bounds the memory."""
    view = memoryview(out)
    n = 0
    rest = bytes(data)
    while rest:
        z = zlib.decompressobj(31)
        try:
            chunk = z.decompress(rest, limit + 1 - n)
        except zlib.error as exc:
            raise CorruptMessage(f"gzip records do not decompress: {exc}") from None
        view[n : n + len(chunk)] = chunk
        n += len(chunk)
        if n > limit or z.unconsumed_tail:
            raise DecompressionBomb(f"gzip records expand past {limit:,} bytes")
        if not z.eof:
            raise CorruptMessage("gzip records end mid-stream")
        rest = z.unused_data
    return n


def _unsnappy_into(data: memoryview, out: np.ndarray, limit: int) -> int:
    """xerial-framed (or raw) snappy into out, checking each block's declared length first."""
    if bytes(data[:8]) != XERIAL_MAGIC:
        return _raw_snappy_into(data, out, 0, limit)
    p, n = 16, 0
    while p < len(data):
        if p + 4 > len(data):
            raise CorruptMessage("snappy block length cut short")
        (size,) = _I32.unpack_from(data, p)
        if size < 0 or p + 4 + size > len(data):
            raise CorruptMessage("snappy block runs past the records")
        n += _raw_snappy_into(data[p + 4 : p + 4 + size], out, n, limit)
        p += 4 + size
    return n


def _raw_snappy_into(block, out: np.ndarray, at: int, limit: int) -> int:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise CorruptMessage(f"snappy records do not decompress: {exc}") from None
    if at + size > limit:
        raise DecompressionBomb(f"snappy records expand past {limit:,} bytes")
    return cramjam.snappy.decompress_raw_into(block, out[at : at + size])


# ---------------------------------------------------------------- batches


def codec_of_batch(batch, pos: int = 0) -> int:
    return batch[pos + _ATTRIBUTES + 1] & 0x07


def compress_batch(batch, codec: int, level: int | None = None) -> bytearray:
    """An uncompressed batch as a `codec` batch: same header fields, records compressed, CRC redone."""
    return _rebuild(batch, compress(codec, memoryview(batch)[HEADER_SIZE:], level), codec)


def decompress_batch(batch, limit: int) -> bytearray:
    """A compressed batch in its uncompressed form (codec bits cleared, CRC redone)."""
    codec = codec_of_batch(batch)
    return _rebuild(batch, decompress(codec, memoryview(batch)[HEADER_SIZE:], limit), NONE)


def _rebuild(batch, body, codec: int) -> bytearray:
    out = bytearray(HEADER_SIZE + len(body))
    out[:HEADER_SIZE] = memoryview(batch)[:HEADER_SIZE]
    out[HEADER_SIZE:] = body
    _I32.pack_into(out, _BATCH_LENGTH, len(out) - LOG_OVERHEAD)
    out[_ATTRIBUTES + 1] = (out[_ATTRIBUTES + 1] & ~0x07 & 0xFF) | codec
    _CRC.pack_into(out, _CRC_AT, crc32c(memoryview(out)[_CRC_START:]))
    return out
