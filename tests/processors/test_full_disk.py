"""A broker whose data directory fills up answers KAFKA_STORAGE_ERROR, keeps its processors, and resumes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import confluent_kafka
import pytest

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.errors import KafkaStorageError
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from tests import disk
from tests.processors.test_bad_input import produce_one
from tests.processors.test_handlers import make_topic
from mmlog.testing.wait import wait_for

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


def sleeps(pid: int) -> int:
    """How many times the process's threads have gone to sleep (voluntary context switches, from /proc):
    it grows with every round of a loop that ends in a wait."""
    return sum(int(line.split()[1]) for task in Path(f"/proc/{pid}/task").iterdir()
               for line in (task / "status").read_text().splitlines() if line.startswith("voluntary_ctxt_switches"))


def _read_all(bootstrap: str, topic: str, want: int, timeout: float = 20.0) -> list[tuple[int, bytes]]:
    """(offset, value) of the first `want` records of partition 0, read from offset 0 by a real consumer."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "full-disk-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.offset(), msg.value()))
    consumer.close()
    return got


@pytest.mark.parametrize("settings", [{}, {"log.index.interval.bytes": 0}], ids=["defaults", "index-every-batch"])
def test_a_disk_given_back_a_page_at_a_time_answers_every_record_promptly_and_no_process_dies(tmp_path, settings):
    """The full disk as an operator meets it: a 16 MiB tmpfs as the only log dir, a topic made while
    there was space, the file system then filled with one-page files and given back a page at a time,
    one acks=all record (larger than a page, so the disk stays at its edge) produced after each.

    Guarantee: every record is acknowledged or refused with KAFKA_STORAGE_ERROR, each within 10 s (a
    third of the request timeout, on a loaded machine; about 0.1 s is usual): never timed out; no
    processor dies (no store into an index page without its block: SIGBUS) and the log cleaner keeps
    running though the disk is full (no topic is compacted; its backoff is cut to 0.3 s here so that it
    meets the full disk many times); every acknowledged record is read back at its acknowledged offset
    once the disk is freed, and again after a stop on a full disk (exit code 0) and a restart on the
    still full disk, where an idempotent producer's record (it needs a producer id first) is refused
    with KAFKA_STORAGE_ERROR too, and acknowledged once space returns."""
    config = {"log.cleaner.backoff.ms": 300, **settings}
    with disk.small_fs(tmp_path, "16m") as fs, EmbeddedBroker(fs / "data", config=config) as broker:
        admin = Admin(broker.bootstrap)
        admin.create_topic("edge", 1)
        admin.close()
        processors, cleaner = sorted(broker.processor_pids()), broker.cleaner_pid()
        pages = disk.fill_with_pages(fs / "filler")
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
            # A few quick retries, as producers have: several attempts per page given back, and what a
            # record that never fits gets is the broker's answer, not a retry until it times out.
            "retries": 3, "retry.backoff.ms": 10,
            "request.timeout.ms": 30000, "message.timeout.ms": 30000})
        acknowledged, refused = [], 0
        cleaner_sleeps = sleeps(cleaner)
        for i, page in enumerate(pages[:150]):
            os.unlink(page)
            outcome = []
            value = b"r%d." % i + b"x" * 6000
            producer.produce("edge", value=value, partition=0, on_delivery=lambda err, msg: outcome.append((err, msg)))
            assert producer.flush(30) == 0
            [(err, msg)] = outcome
            if err is None:
                acknowledged.append((msg.offset(), value))
            else:  # answered by the broker: not a timeout (the request and message timeouts are 30 s)
                assert err.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR, f"record {i}: {err}"
                refused += 1
            time.sleep(0.01)
        assert acknowledged and refused  # the disk was at its edge: both outcomes met
        # The cleaner went round its loop several times on the full disk (each round ends in its backoff).
        wait_for(lambda: sleeps(cleaner) >= cleaner_sleeps + 5, what="five rounds of the cleaner")
        assert not [line for line in broker.log_lines if "died" in line]
        assert sorted(broker.processor_pids()) == processors and broker.cleaner_pid() == cleaner

        for page in pages[150:]:
            os.unlink(page)
        outcome = []
        producer.produce("edge", value=b"after", partition=0, on_delivery=lambda err, msg: outcome.append((err, msg)))
        assert producer.flush(30) == 0 and outcome[0][0] is None
        acknowledged.append((outcome[0][1].offset(), b"after"))
        del producer  # (librdkafka's threads go with it: none left to reconnect to a stopped broker)
        assert _read_all(broker.bootstrap, "edge", len(acknowledged)) == acknowledged

        # Stopped on a full disk, it still shuts down cleanly (what it cannot write, recovery makes good),
        # and starts again on the full disk: recovery needs no block the entries did not have already.
        filler = disk.fill(fs)
        assert broker.stop() == 0
        broker.start()
        assert _read_all(broker.bootstrap, "edge", len(acknowledged)) == acknowledged
        # An idempotent producer (mmlog's, by default) first needs a producer id, whose block the
        # restarted broker must record: on the full disk too, and then its record gets the storage error.
        full_again = disk.fill(fs)  # what the stop and the start gave back
        with Producer(broker.bootstrap, linger_ms=0) as idempotent:
            with pytest.raises(KafkaStorageError):  # the broker's answer, not a timeout
                idempotent.send("edge", b"x" * 6000, partition=0).get(20)  # pages the disk has not
            os.unlink(filler)
            os.unlink(full_again)
            offset = idempotent.send("edge", b"room", partition=0).get(20).offset
        acknowledged.append((offset, b"room"))
        assert _read_all(broker.bootstrap, "edge", len(acknowledged)) == acknowledged


def test_the_log_cleaner_waits_out_a_full_disk_and_cleans_once_there_is_room(tmp_path):
    """Guarantee: a compacted log due for cleaning on a full disk is not a cleaner death nor a partition
    given up until a restart: the cleaner says once that it waits, leaves no half-written cleaned files
    behind (they would hold blocks the producers lack), and cleans the log once space comes back."""
    with disk.small_fs(tmp_path, "16m") as fs, EmbeddedBroker(fs / "data", config={
            "log.cleaner.backoff.ms": 200}) as broker:
        admin = Admin(broker.bootstrap)
        # Cleanable only 3 s after it was written: by then the disk is full.
        admin.create_topic("keyed", 1, config={"cleanup.policy": "compact", "segment.bytes": "8192",
                                               "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3000"})
        admin.close()
        cleaner = broker.cleaner_pid()
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1,
                                             "batch.size": 2048})  # batches that fit the 8 KiB segments
        final, failed = {}, []
        for r in range(30):
            for k in range(40):
                key, value = b"key-%d" % k, b"value-%d-%d." % (k, r) + b"x" * 100
                producer.produce("keyed", value, key, partition=0,
                                 on_delivery=lambda err, msg: err is not None and failed.append(err))
                final[key] = value
            producer.poll(0)
        assert producer.flush(10) == 0 and not failed
        del producer
        filler = disk.fill(fs)
        partition_dir = fs / "data" / "keyed-0"
        # The log becomes cleanable (3 s after it was written), and the cleaner meets the full disk...
        wait_for(lambda: any("log cleaner: a log dir is full" in line for line in broker.log_lines),
                 what="the cleaner to meet the full disk")
        cleaner_sleeps = sleeps(cleaner)  # ...and again a dozen times (each round ends in its backoff)
        wait_for(lambda: sleeps(cleaner) >= cleaner_sleeps + 12, what="a dozen rounds of the cleaner")
        waiting = [line for line in broker.log_lines if "log cleaner: a log dir is full" in line]
        assert len(waiting) == 1 and "No space left on device" in waiting[0]
        assert not [line for line in broker.log_lines if "died" in line or "leaving it alone" in line]
        assert broker.cleaner_pid() == cleaner
        assert not [name for name in os.listdir(partition_dir) if name.endswith(".cleaned")]

        os.unlink(filler)
        wait_for(lambda: any(line for line in broker.log_lines if "cleaned keyed-0" in line),
                 what="keyed-0 cleaned", show=lambda: broker.log_lines[-20:])
        assert len([line for line in broker.log_lines if "room on disk again" in line]) == 1
        assert broker.cleaner_pid() == cleaner
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "keyed-reader",
                                             "enable.auto.commit": False, "enable.partition.eof": True})
        consumer.assign([confluent_kafka.TopicPartition("keyed", 0, 0)])
        last, read = {}, 0
        while True:
            msg = consumer.poll(5)
            assert msg is not None
            if msg.error() is not None:
                assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                break
            last[msg.key()] = msg.value()
            read += 1
        consumer.close()
        assert last == final and read < 30 * 40  # every key's final value, fewer records than written
