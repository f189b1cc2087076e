"""A broker whose data directory fills up answers KAFKA_STORAGE_ERROR, keeps its processors, and resumes."""

from __future__ import annotations

import os

from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from tests import disk
from tests.processors.test_bad_input import connect, fetch_one, produce_one
from tests.processors.test_handlers import make_topic

KAFKA_STORAGE_ERROR = 56


def test_a_full_disk_is_a_storage_error_not_a_crash_and_writes_resume(tmp_path):
    with disk.small_fs(tmp_path, "4m") as fs, EmbeddedBroker(fs / "data", config={
            "log.segment.bytes": 256 * 1024, "log.index.size.max.bytes": 256 * 1024,
            "log.index.interval.bytes": 256}) as broker:
        processors = broker.processor_pids()
        batch = build_batch([(None, b"x" * 1000)] * 4)
        acknowledged = 0
        with connect(broker) as conn:
            make_topic(conn, "full")
            for _ in range(50):
                assert produce_one(conn, "full", 0, bytearray(batch)).error_code == 0
                acknowledged += 4
            filler = disk.fill(fs)
            codes = [produce_one(conn, "full", 0, bytearray(batch)).error_code for _ in range(200)]
            acknowledged += 4 * codes.count(0)
            assert KAFKA_STORAGE_ERROR in codes and set(codes) <= {0, KAFKA_STORAGE_ERROR}
            assert broker.processor_pids() == processors and broker.proc.poll() is None
            os.unlink(filler)
            assert produce_one(conn, "full", 0, bytearray(batch)).error_code == 0
            acknowledged += 4
            part = fetch_one(conn, "full", 0, 0)
            assert part.error_code == 0 and part.high_watermark == acknowledged
        assert broker.processor_pids() == processors
