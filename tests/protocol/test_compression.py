"""The four codecs in Kafka's framing, bounded decompression, and whole batches turned from one form to the other."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest

from mmlog.errors import CorruptMessage
from mmlog.protocol import compression as c
from mmlog.protocol import records as rec

CODECS = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
DATA = b"".join(b'{"user": %d, "page": "/home", "ms": %d}' % (i, i * 7) for i in range(5000))


@pytest.mark.parametrize("codec", CODECS, ids=c.NAMES.get)
def test_each_codec_round_trips(codec):
    packed = c.compress(codec, DATA)
    assert len(packed) < len(DATA) / 3
    assert bytes(c.decompress(codec, packed, len(DATA))) == DATA


def test_snappy_uses_the_xerial_framing_java_clients_write():
    packed = c.compress(c.SNAPPY, DATA)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first,) = struct.unpack_from(">i", packed, 16)  # blocks of at most 32 KiB of input each
    assert bytes(cramjam.snappy.decompress_raw(packed[20:20 + first])) == DATA[:32 * 1024]


def test_plain_raw_snappy_is_read_too():
    assert bytes(c.decompress(c.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA)), len(DATA))) == DATA


def test_gzip_is_ordinary_gzip_and_several_members_are_read():
    packed = c.compress(c.GZIP, DATA)
    assert gzip.decompress(packed) == DATA
    two = gzip.compress(b"abc") + gzip.compress(b"def")
    assert bytes(c.decompress(c.GZIP, two, 100)) == b"abcdef"


@pytest.mark.parametrize("codec", CODECS, ids=c.NAMES.get)
def test_a_decompression_bomb_is_refused_at_the_limit(codec):
    bomb = c.compress(codec, bytes(8 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(c.DecompressionBomb, match="expand past 1,000,000 bytes"):
        c.decompress(codec, bomb, 1_000_000)
    assert len(c.decompress(codec, bomb, 8 << 20)) == 8 << 20  # at the limit exactly: fine


@pytest.mark.parametrize("codec", CODECS, ids=c.NAMES.get)
def test_a_damaged_stream_is_corrupt_message(codec):
    packed = bytearray(c.compress(codec, os.urandom(3000)))
    del packed[len(packed) // 2:]
    with pytest.raises(CorruptMessage):
        c.decompress(codec, bytes(packed), 1 << 20)


@pytest.mark.parametrize("codec", CODECS, ids=c.NAMES.get)
def test_a_batch_compressed_keeps_its_header_and_its_records(codec):
    plain = rec.build_batch([(b"k%d" % i, b"value-%d" % i * 20, [("h", b"x")]) for i in range(50)],
                            base_offset=7, producer_id=3, producer_epoch=1, base_sequence=40)
    packed = c.compress_batch(plain, codec)
    h, p = rec.validate_batch(packed), rec.read_header(plain)
    assert h.compression == codec and h.size < p.size
    assert h._replace(batch_length=0, crc=0, attributes=0) == p._replace(batch_length=0, crc=0, attributes=0)
    assert [(r.key, r.value, r.headers) for r in rec.decode_records(packed)] == \
           [(r.key, r.value, r.headers) for r in rec.decode_records(plain)]
    assert c.decompress_batch(packed, 1 << 20) == plain


def test_build_batch_takes_every_codec():
    for codec in CODECS:
        batch = rec.build_batch([(None, b"v")], compression=codec)
        assert rec.validate_batch(batch).compression == codec
        assert rec.decode_records(batch)[0].value == b"v"


@pytest.mark.parametrize("name, level, ok", [
    ("gzip", 9, True), ("gzip", 10, False), ("zstd", -5, True), ("zstd", 23, False), ("lz4", 17, True),
    ("snappy", 1, False),
])
def test_levels_where_a_codec_has_them(name, level, ok):
    codec = c.codec_of(name)
    if ok:
        assert c.check_level(codec, level) == level
        c.compress(codec, DATA, level)
    else:
        with pytest.raises(ValueError):
            c.check_level(codec, level)


def test_unknown_codec_names_are_refused():
    with pytest.raises(ValueError, match="unknown compression type 'brotli'"):
        c.codec_of("brotli")
