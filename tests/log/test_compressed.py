"""Compressed batches on append: checked record by record, and recompressed to the topic's compression.type."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from mmlog.config.settings import LogConfig
from mmlog.errors import CorruptMessage
from mmlog.log import kernels
from mmlog.protocol import compression as c
from mmlog.protocol import records as rec
from tests.log.logtools import stored_batches

RECORDS = [(b"k%d" % i, b'{"n": %d, "pad": "%s"}' % (i, b"x" * 50)) for i in range(40)]


def codecs_on_disk(p) -> list[int]:
    return [b.header.compression for b in stored_batches(p.directory)]


def test_producer_keeps_the_clients_bytes(open_partition):
    p = open_partition()
    batch = rec.build_batch(RECORDS, compression=c.SNAPPY)
    p.append(bytearray(batch))
    (stored,) = stored_batches(p.directory)
    assert stored.data[12:] == bytes(batch)[12:]  # all but baseOffset and epoch: the client's bytes


@pytest.mark.parametrize("topic_codec", ["zstd", "gzip", "lz4", "snappy", "uncompressed"])
def test_a_topic_codec_recompresses_every_other_codec(open_partition, config, topic_codec):
    p = open_partition(cfg=dataclasses.replace(config, compression_type=topic_codec))
    for codec in (c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD):
        p.append(rec.build_batch(RECORDS, compression=codec))
    assert set(codecs_on_disk(p)) == {c.codec_of(topic_codec)}
    values = [r.value for b in stored_batches(p.directory) for r in rec.decode_records(b.data)]
    assert values == [v for _, v in RECORDS] * 5
    assert p.log_end_offset == 5 * len(RECORDS)


def test_mixed_codecs_in_one_partition_read_back_in_order(open_partition):
    p = open_partition()
    for i, codec in enumerate([c.GZIP, c.NONE, c.ZSTD, c.LZ4, c.SNAPPY]):
        p.append(rec.build_batch([(None, b"%d-%d" % (i, j)) for j in range(3)], compression=codec))
    assert codecs_on_disk(p) == [1, 0, 4, 3, 2]
    values = [r.value for b in stored_batches(p.directory) for r in rec.decode_records(b.data)]
    assert values == [b"%d-%d" % (i, j) for i in range(5) for j in range(3)]


def compressed_with(records_body: bytes, count: int, last_delta: int, codec=c.ZSTD) -> bytearray:
    return rec._assemble(c.compress(codec, records_body), base_offset=0, partition_leader_epoch=0, attributes=codec,
                         last_offset_delta=last_delta, base_timestamp=0, max_timestamp=0, producer_id=-1,
                         producer_epoch=-1, base_sequence=-1, records_count=count)


def body_of(deltas) -> bytes:
    out = bytearray()
    for d in deltas:
        rec.encode_record(out, d, 0, None, b"v")
    return bytes(out)


@pytest.mark.parametrize("deltas, count, last, reason", [
    ([0, 1, 2], 4, 3, "runs past"),          # the header counts a record that is not there
    ([0, 1, 2], 2, 1, "after the last"),     # one record more than counted
    ([0, 2, 3], 3, 2, "out of order"),       # an inner offset skipped
    ([0, 1, 2], 3, 5, "lastOffsetDelta"),    # the header's last delta disagrees
])
def test_a_compressed_batch_that_disagrees_with_its_header_is_corrupt(open_partition, deltas, count, last, reason):
    p = open_partition()
    good = rec.build_batch([(None, b"ok")])
    bad = compressed_with(body_of(deltas), count, last)
    outcomes = p.append_many([bytearray(good), bad])
    assert isinstance(outcomes[1], CorruptMessage) and reason in str(outcomes[1])
    assert p.log_end_offset == 1  # the good one alone


def test_a_decompression_bomb_is_refused_without_appending(open_partition, config):
    p = open_partition(cfg=dataclasses.replace(config, max_message_bytes=10_000))
    bomb = compressed_with(bytes(2 << 20), 1, 0)  # 2 MiB of zeros in a few hundred bytes
    assert len(bomb) < 10_000
    with pytest.raises(CorruptMessage, match="expand past 640,000 bytes"):
        p.append(bomb)
    assert p.log_end_offset == 0


def test_check_records_agrees_with_its_reference(seed=7):
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.randrange(0, 6)
        body = bytearray(body_of(range(n)))
        if rng.random() < 0.5 and body:  # damage it
            i = rng.randrange(len(body))
            body[i] = rng.randrange(256)
        count = max(0, n + rng.choice([-1, 0, 0, 1]))
        arr = np.frombuffer(bytes(body), dtype=np.uint8)
        assert kernels.check_records(arr, len(body), count) == kernels.check_records_py(bytes(body), len(body), count)
