"""Compacted topics with real clients: confluent-kafka creates and fills one, the broker's cleaner process
compacts it, and confluent-kafka, kafka-python and kcat read the final value of every key from the start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaConsumer, TopicPartition

from mmlog import testing
from mmlog.log.cleaner.cleaner import CRASH_ENV, STATUS_FILE
from mmlog.log.cleaner.manager import PROCESS_NAME
from mmlog.testing import EmbeddedBroker
from tests.interop.conftest import require
from mmlog.testing.wait import wait_for

TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "3600000"}
KEYS = 40


@pytest.fixture
def cleaning_broker(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=2, config={"log.cleaner.backoff.ms": 100}) as b:
        yield b


def create(bootstrap: str, topic: str, config=TOPIC_CONFIG) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=dict(config))])[topic].result(10)


def produce(bootstrap: str, topic: str, rounds: int = 30) -> dict[bytes, bytes | None]:
    """rounds x KEYS keyed records, then a tombstone for every tenth key; the final value of each key."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "batch.size": 2048})
    final: dict[bytes, bytes | None] = {}
    for r in range(rounds):
        for k in range(KEYS):
            key, value = b"key-%d" % k, b"value-%d-%d" % (k, r) + b"." * 100
            producer.produce(topic, value, key, partition=0)
            final[key] = value
        producer.poll(0)
    for k in range(0, KEYS, 10):
        producer.produce(topic, None, b"key-%d" % k, partition=0)
        final[b"key-%d" % k] = None
    assert producer.flush(10) == 0
    return final


def cleaned(broker: EmbeddedBroker, topic: str, timeout: float = 30) -> dict:
    """Wait for the cleaner's status to show topic-0 cleaned up to its active segment (nothing dirty left
    in two looks a few of its rounds apart)."""
    deadline = time.monotonic() + timeout
    clean_looks = 0
    while time.monotonic() < deadline:
        try:
            entry = json.loads((broker.data_dir / STATUS_FILE).read_text()).get(f"{topic}-0", {})
        except (OSError, ValueError):
            entry = {}
        clean_looks = clean_looks + 1 if "last_run" in entry and entry.get("dirty_ratio") == 0 else 0
        if clean_looks == 2:
            return entry
        time.sleep(0.3)
    raise AssertionError(f"no cleaning of {topic} within {timeout} s:\n" + "\n".join(broker.log_lines[-20:]))


def read_confluent(bootstrap: str, topic: str,
                   isolation: str = "read_uncommitted") -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record a consumer of `isolation` reads from the start to the end."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def check_compacted(records, final: dict, produced: int) -> None:
    """The final value of every key (a tombstone within delete.retention.ms: the delete itself), in order."""
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    last = {}
    for _, key, value in records:
        last[key] = value
    assert last == final
    assert len(records) < produced / 2  # cleaned, not merely read back


def test_confluent_kafka_creates_a_compacted_topic_and_reads_the_final_value_of_every_key(cleaning_broker):
    b = cleaning_broker
    create(b.bootstrap, "changelog")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "changelog")
    described = admin.describe_configs([resource])[resource].result(10)
    assert described["cleanup.policy"].value == "compact"
    final = produce(b.bootstrap, "changelog")
    status = cleaned(b, "changelog")
    assert status["last_run"]["records_kept"] < status["last_run"]["records_read"]
    # the active segment (never cleaned) may still hold older values: roll it by producing one more round
    records = read_confluent(b.bootstrap, "changelog")
    check_compacted(records, final, 30 * KEYS)


def test_kafka_python_and_kcat_read_a_compacted_topic_with_its_gaps(cleaning_broker):
    b = cleaning_broker
    create(b.bootstrap, "gaps")
    final = produce(b.bootstrap, "gaps")
    cleaned(b, "gaps")
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    tp = TopicPartition("gaps", 0)
    consumer.assign([tp])
    records, deadline = [], time.monotonic() + 30
    try:
        end = consumer.end_offsets([tp])[tp]
        while consumer.position(tp) < end:  # to the end, however slow the machine (not "3 s of silence")
            assert time.monotonic() < deadline, f"read {len(records)} records, position {consumer.position(tp)} < {end}"
            for batch in consumer.poll(timeout_ms=500).values():
                records += [(m.offset, m.key, m.value) for m in batch]
    finally:
        consumer.close()
    check_compacted(records, final, 30 * KEYS)
    kcat = require("kcat")
    out = subprocess.run([kcat, "-C", "-b", b.bootstrap, "-t", "gaps", "-p", "0", "-o", "beginning", "-e",
                          "-f", "%o %k\n", "-q"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert [int(line.split()[0]) for line in out.splitlines()] == [o for o, _, _ in records]


@pytest.mark.parametrize("point", ["swap-committed", "old-segments-deleted"])
def test_a_cleaner_process_killed_mid_swap_loses_no_last_value_and_a_restart_finishes_the_swap(tmp_path, monkeypatch,
                                                                                              point):
    monkeypatch.setenv(CRASH_ENV, point)
    with EmbeddedBroker(tmp_path / "broker", processors=1, config={"log.cleaner.backoff.ms": 100}) as b:
        create(b.bootstrap, "crashy")
        final = produce(b.bootstrap, "crashy")
        wait_for(lambda: any("log cleaner" in line and "died" in line for line in b.log_lines),
                 what="the cleaner to die", interval=0.1, show=lambda: b.log_lines[-20:])
        b.kill()  # the whole broker dies too, with the swap half done
        monkeypatch.delenv(CRASH_ENV)
        b.start()
        records = read_confluent(b.bootstrap, "crashy")
        last = {}
        for _, key, value in records:
            last[key] = value
        assert last == final
        cleaned(b, "crashy")
        check_compacted(read_confluent(b.bootstrap, "crashy"), final, 30 * KEYS)
        assert not [p for p in (b.data_dir / "crashy-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_topics_describe_shows_the_dirty_ratio_and_the_cleaners_last_run(cleaning_broker):
    b = cleaning_broker
    create(b.bootstrap, "described")
    produce(b.bootstrap, "described", rounds=10)
    cleaned(b, "described")
    out = subprocess.run([sys.executable, "-m", "mmlog", "topics", "--bootstrap", b.bootstrap, "describe", "described",
                          "--data-dir", str(b.data_dir)], capture_output=True, text=True, timeout=60, check=True).stdout
    line = next(line for line in out.splitlines() if "cleaner:" in line)
    assert "dirty ratio 0.00" in line and "last run " in line and "records kept" in line


def test_the_cleaner_runs_as_a_process_of_its_own_that_the_supervisor_replaces(cleaning_broker):
    b = cleaning_broker
    assert testing.CLEANER_PROCESS_NAME == PROCESS_NAME
    pid = b.cleaner_pid()
    assert pid is not None and pid not in b.processor_pids() and len(b.processor_pids()) == 2
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: b.cleaner_pid() not in (None, pid), what="a new cleaner", show=lambda: b.log_lines[-10:])
    assert any("log cleaner" in line and "died with signal SIGKILL" in line for line in b.log_lines)


def test_a_compacted_topic_refuses_records_without_a_key_as_kafka_does(cleaning_broker):
    from mmlog.protocol.records import build_batch
    from mmlog.testing.connections import connect
    from tests.processors.test_bad_input import produce_one

    create(cleaning_broker.bootstrap, "keys-only")
    with connect(cleaning_broker) as conn:
        keyed = produce_one(conn, "keys-only", 0, build_batch([(b"k", b"v")]))
        keyless = produce_one(conn, "keys-only", 0, build_batch([(b"k", b"v"), (None, b"no key")]))
        zipped = produce_one(conn, "keys-only", 0, build_batch([(None, b"no key")], compression=1))
    assert keyed.error_code == 0
    assert keyless.error_code == zipped.error_code == 87  # INVALID_RECORD
    assert "without key" in keyless.error_message
