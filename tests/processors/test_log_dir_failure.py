"""A log dir whose disk fails (EIO) goes offline as a whole: its partitions answer KAFKA_STORAGE_ERROR,
Metadata reports them offline, the partitions of the other dirs go on, and a broker left with no log dir
stops (Kafka's log dir failure handling). The failing disk is a real one: an ext4 image shut down."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import confluent_kafka
import pytest

from mmlog.protocol.messages import metadata
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from tests import disk
from tests.processors.test_bad_input import produce_one
from tests.processors.test_handlers import make_topic
from mmlog.testing.wait import wait_for

KAFKA_STORAGE_ERROR = 56
PARTITIONS = 6


def placement(dirs: list[Path], topic: str) -> dict[int, Path]:
    """The log dir each partition of the topic lives in."""
    return {p: d for d in dirs for p in range(PARTITIONS) if (d / f"{topic}-{p}").is_dir()}


def test_a_failed_disk_takes_its_log_dir_offline_and_the_broker_serves_the_others(tmp_path):
    with disk.failing_fs(tmp_path) as ext4:
        healthy, failing = tmp_path / "healthy", ext4 / "data"
        with EmbeddedBroker(f"{healthy},{failing}", config={"num.partitions": PARTITIONS}) as broker:
            batch = build_batch([(None, b"v" * 100)] * 5)
            with connect(broker) as conn:
                make_topic(conn, "disks")
                where = placement([healthy, failing], "disks")
                assert len(where) == PARTITIONS
                bad = sorted(p for p, d in where.items() if d == failing)
                good = sorted(p for p, d in where.items() if d == healthy)
                assert bad and good
                for p in range(PARTITIONS):
                    assert produce_one(conn, "disks", p, bytearray(batch)).error_code == 0
                # (read once the broker is up a while: a just-forked log cleaner has no name of its own yet)
                processors = sorted(broker.processor_pids())

                disk.shut_down(ext4)

                # The first write on the dead disk fails with EIO and takes the whole dir offline; every
                # partition in it answers KAFKA_STORAGE_ERROR from then on, reads included.
                # (A hang on the dead disk would outlast the connection's timeout: an error, not an answer.)
                for p in bad:
                    assert produce_one(conn, "disks", p, bytearray(batch)).error_code == KAFKA_STORAGE_ERROR
                for p in bad:
                    assert fetch_one(conn, "disks", p, 0).error_code == KAFKA_STORAGE_ERROR
                for p in good:  # the other dir goes on: writes acknowledged, everything readable
                    assert produce_one(conn, "disks", p, bytearray(batch)).error_code == 0
                    part = fetch_one(conn, "disks", p, 0)
                    assert part.error_code == 0 and part.high_watermark == 10

                answer = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "disks"}]))
                by_index = {p.partition_index: p for p in answer.topics[0].partitions}
                for p in bad:
                    assert (by_index[p].error_code, by_index[p].leader_id) == (KAFKA_STORAGE_ERROR, -1)
                    assert list(by_index[p].offline_replicas) == [0]
                for p in good:
                    assert (by_index[p].error_code, by_index[p].leader_id) == (0, 0)

            # Real clients: a producer and a consumer keep using the healthy partitions.
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
            delivered = []
            for i in range(20):
                producer.produce("disks", value=b"c%d" % i, partition=good[i % len(good)],
                                 on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(10) == 0 and delivered == [None] * 20
            consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                                                 "enable.auto.commit": False})
            consumer.assign([confluent_kafka.TopicPartition("disks", p, 0) for p in good])
            values = []
            deadline = time.monotonic() + 10
            while len(values) < 20 + 10 * len(good) and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
            consumer.close()
            assert len(values) == 20 + 10 * len(good)  # every acknowledged record of the healthy dir

            # The broker stays up with the same processors, and says so once, clearly.
            assert wait_for(lambda: any("is offline" in line for line in broker.log_lines))
            assert broker.proc.poll() is None and sorted(broker.processor_pids()) == processors
            lines = [line for line in broker.log_lines if f"log dir {failing} is offline" in line]
            assert len(lines) == 1 and "EIO" in lines[0] and f"its {len(bad)} partitions" in lines[0]
            assert broker.stop() == 0


def test_a_broker_whose_only_log_dir_fails_stops(tmp_path):
    with disk.failing_fs(tmp_path) as ext4:
        with EmbeddedBroker(ext4 / "data", config={"num.partitions": 2}) as broker:
            with connect(broker) as conn:
                make_topic(conn, "alone")
                assert produce_one(conn, "alone", 0, bytearray(build_batch([(None, b"x")]))).error_code == 0
                disk.shut_down(ext4)
                assert produce_one(conn, "alone", 0, bytearray(build_batch([(None, b"y")]))).error_code == \
                    KAFKA_STORAGE_ERROR
            try:
                code = broker.proc.wait(10)
            except Exception:  # noqa: BLE001 - still running: the assertion below says so
                pytest.fail("the broker kept running with no log dir:\n" + "\n".join(broker.log_lines[-20:]))
            assert code == 1
            assert any("every log dir is offline" in line for line in broker.log_lines)


def test_a_processor_killed_by_sigbus_is_replaced_once_and_its_replacement_leaves_the_failed_dir_alone(tmp_path):
    # SIGBUS is what touching an mmap of a failing disk raises; it is sent here by kill, on a disk shut
    # down before any request met an error, so only the supervisor's probe can find the failed dir.
    with disk.failing_fs(tmp_path) as ext4:
        healthy, failing = tmp_path / "healthy", ext4 / "data"
        with EmbeddedBroker(f"{healthy},{failing}", processors=1, config={"num.partitions": PARTITIONS}) as broker:
            batch = build_batch([(None, b"v" * 100)] * 5)
            with connect(broker) as conn:
                make_topic(conn, "bus")
                for p in range(PARTITIONS):
                    assert produce_one(conn, "bus", p, bytearray(batch)).error_code == 0
            where = placement([healthy, failing], "bus")
            bad = sorted(p for p, d in where.items() if d == failing)
            [victim] = broker.processor_pids()
            disk.shut_down(ext4)
            os.kill(victim, signal.SIGBUS)
            assert wait_for(lambda: broker.processor_pids() not in ([], [victim]))
            with connect(broker) as conn:
                for p in range(PARTITIONS):
                    code = produce_one(conn, "bus", p, bytearray(batch)).error_code
                    assert code == (KAFKA_STORAGE_ERROR if p in bad else 0)
            lines = [line for line in broker.log_lines if f"log dir {failing} is offline" in line]
            assert len(lines) == 1 and "a probe after a SIGBUS death" in lines[0]
            assert len([line for line in broker.log_lines if "died with signal SIGBUS" in line]) == 1
            assert broker.proc.poll() is None and len(broker.processor_pids()) == 1
