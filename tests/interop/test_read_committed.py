"""Transactions on a real broker, the coordinator played with raw requests: transactional batches produced
with a producer id, then WriteTxnMarkers sent to the leader. What each consumer sees is checked with
librdkafka (confluent-kafka), kafka-python and mmlog's own Consumer, under both isolation levels."""

from __future__ import annotations

import threading
import time

import confluent_kafka
import kafka
import pytest

from mmlog.client.connection import BrokerConnection
from mmlog.client.consumer import Consumer
from mmlog.protocol import records as rec
from mmlog.protocol.messages import fetch, list_offsets
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect
from tests.client.consumer_tools import (
    TxnProducer,
    create_topic,
    new_producer_id,
    produce,
    write_markers,
)
from mmlog.testing.scrape import scrape
from mmlog.testing.wait import wait_for
from tests.processors.test_bad_input import produce_one

COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"


# ---------------------------------------------------------------- what each client reads


def read_confluent(broker, topic: str, isolation: str, expect: int, idle: float = 1.0) -> list[bytes]:
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}-{isolation}",
                                  "isolation.level": isolation, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        return _drain(lambda: [m.value() for m in c.consume(100, 0.2) if not m.error()], expect, idle)
    finally:
        c.close()


def read_kafka_python(broker, topic: str, isolation: str, expect: int, idle: float = 1.0) -> list[bytes]:
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                            enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign([kafka.TopicPartition(topic, 0)])
        c.seek_to_beginning()
        return _drain(lambda: [r.value for rs in c.poll(200).values() for r in rs], expect, idle)
    finally:
        c.close()


def read_mmlog(broker, topic: str, isolation: str, expect: int, idle: float = 1.0) -> list[bytes]:
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", isolation_level=isolation) as c:
        c.assign([(topic, 0)])
        return _drain(lambda: [r.value for r in c.poll(0.2)], expect, idle)


def read_mmlog_bulk(broker, topic: str, isolation: str, expect: int, idle: float = 1.0) -> list[bytes]:
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", isolation_level=isolation) as c:
        c.assign([(topic, 0)])
        return _drain(lambda: [v for arrays in c.poll_batch(0.2) for v in arrays.values()], expect, idle)


READERS = [read_confluent, read_kafka_python, read_mmlog, read_mmlog_bulk]


def _drain(poll, expect: int, idle: float, timeout: float = 20.0) -> list[bytes]:
    """Poll until `expect` values came, then for `idle` seconds more (anything after is an error)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < expect and time.monotonic() < deadline:
        got += poll()
    end = time.monotonic() + idle
    while time.monotonic() < end:
        got += poll()
    return got


# ---------------------------------------------------------------- raw requests


def raw_fetch(broker, topic: str, offset: int, isolation: int, max_wait_ms: int = 0, timeout: float = 10):
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout=timeout) as conn:
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
            topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                      "partition_max_bytes": 1 << 20}]}]))
    return body.responses[0].partitions[0]


def latest(broker, topic: str, isolation: int) -> int:
    with connect(broker) as conn:
        body = conn.request(list_offsets.API_KEY, 5, list_offsets.REQUEST(
            replica_id=-1, isolation_level=isolation, topics=[{"name": topic, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]))
    part = body.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def plain(broker, topic: str, value: bytes) -> int:
    return produce(broker, topic, 0, [(None, value)])


# ---------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def interleaved(broker):
    """Two transactions interleaved with plain records: A aborts, B commits."""
    topic = "txn-interleaved"
    create_topic(broker, topic)
    a, b = TxnProducer(broker), TxnProducer(broker)
    plain(broker, topic, b"p0")
    a.send(topic, 0, [(None, b"a0"), (None, b"a1")])
    b.send(topic, 0, [(None, b"b0")])
    a.send(topic, 0, [(None, b"a2")])
    plain(broker, topic, b"p1")
    a.end(topic, 0, commit=False)
    b.end(topic, 0, commit=True)
    plain(broker, topic, b"p2")
    return topic, a, b


@pytest.mark.parametrize("read", READERS, ids=lambda f: f.__name__[5:])
def test_read_committed_drops_the_aborted_transaction_and_keeps_the_committed_one(broker, interleaved, read):
    topic, _, _ = interleaved
    assert read(broker, topic, COMMITTED, 4) == [b"p0", b"b0", b"p1", b"p2"]


@pytest.mark.parametrize("read", READERS, ids=lambda f: f.__name__[5:])
def test_read_uncommitted_reads_everything_but_the_markers(broker, interleaved, read):
    topic, _, _ = interleaved
    assert read(broker, topic, UNCOMMITTED, 7) == [b"p0", b"a0", b"a1", b"b0", b"a2", b"p1", b"p2"]


def test_the_fetch_response_names_the_aborted_transaction(broker, interleaved):
    topic, a, _ = interleaved
    part = raw_fetch(broker, topic, 0, isolation=1)
    assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [(a.pid, 1)]
    assert part.last_stable_offset == part.high_watermark == 9
    beyond = raw_fetch(broker, topic, 7, isolation=1)  # past A's abort marker (offset 6): nothing to drop
    assert list(beyond.aborted_transactions) == []
    assert raw_fetch(broker, topic, 0, isolation=0).aborted_transactions is None  # as Kafka: null


@pytest.mark.parametrize("read", READERS, ids=lambda f: f.__name__[5:])
def test_an_open_transaction_stops_read_committed_while_read_uncommitted_reads_past_it(broker, read):
    topic = f"txn-open-{read.__name__}"
    create_topic(broker, topic)
    c = TxnProducer(broker)
    plain(broker, topic, b"before")
    c.send(topic, 0, [(None, b"open")])
    plain(broker, topic, b"after")
    assert read(broker, topic, COMMITTED, 1, idle=1.5) == [b"before"]
    assert read(broker, topic, UNCOMMITTED, 3) == [b"before", b"open", b"after"]
    assert (latest(broker, topic, 0), latest(broker, topic, 1)) == (3, 1)
    c.end(topic, 0, commit=True)
    assert (latest(broker, topic, 0), latest(broker, topic, 1)) == (4, 4)
    assert read(broker, topic, COMMITTED, 3) == [b"before", b"open", b"after"]


def test_a_parked_read_committed_fetch_wakes_when_the_marker_lands(broker):
    topic = "txn-wake"
    create_topic(broker, topic)
    c = TxnProducer(broker)
    c.send(topic, 0, [(None, b"x")])
    got = []
    # Parked for two minutes unless woken: the join's deadline below is shorter, so only the marker's wake-up
    # answers it in time.
    waiter = threading.Thread(target=lambda: got.append(raw_fetch(broker, topic, 0, 1, max_wait_ms=120_000,
                                                                  timeout=150)), daemon=True)
    waiter.start()
    wait_for(lambda: scrape(broker).get("kafka_server_delayedoperationpurgatory_purgatorysize") >= 1,
             what="the fetch to park")
    c.end(topic, 0, commit=True)
    waiter.join(60)
    assert not waiter.is_alive(), "the parked fetch was not woken by the marker"
    assert got[0].last_stable_offset == 2 and len(bytes(got[0].records)) > 0


def test_clients_may_not_produce_control_batches_nor_transactional_batches_without_a_producer_id(broker):
    topic = "txn-refused"
    create_topic(broker, topic)
    with connect(broker) as conn:
        marker = produce_one(conn, topic, 0, rec.build_end_txn_marker(5, 0, True, 0), transactional_id="anonymous")
        anonymous = produce_one(conn, topic, 0, rec.build_batch([(None, b"x")], transactional=True),
                                transactional_id="anonymous")
    assert (marker.error_code, anonymous.error_code) == (87, 87)  # INVALID_RECORD


def test_markers_are_refused_as_kafka_refuses_them(broker):
    topic = "txn-stale"
    create_topic(broker, topic)
    p = TxnProducer(broker, epoch=3)
    p.send(topic, 0, [(None, b"x")])
    errors = write_markers(broker, [
        (p.pid, 2, False, 0, {topic: [0]}),           # an older producer epoch
        (p.pid, 3, True, 0, {topic: [0, 9], "no-such-topic": [0], "__consumer_offsets": [0]}),
    ])
    assert errors == {
        (p.pid, topic, 0): 0,   # the second marker (the answer keeps the last per partition)
        (p.pid, topic, 9): 3, (p.pid, "no-such-topic", 0): 3, (p.pid, "__consumer_offsets", 0): 3,
    }
    stale = write_markers(broker, [(p.pid, 2, False, 0, {topic: [0]})])
    assert stale == {(p.pid, topic, 0): 47}  # INVALID_PRODUCER_EPOCH
    write_markers(broker, [(p.pid, 3, True, 5, {topic: [0]})])
    fenced = write_markers(broker, [(p.pid, 3, True, 4, {topic: [0]})])
    assert fenced == {(p.pid, topic, 0): 52}  # TRANSACTION_COORDINATOR_FENCED
    with connect(broker) as conn:
        late = produce_one(conn, topic, 0, rec.build_batch([(None, b"zombie")], producer_id=p.pid, producer_epoch=2,
                                                         base_sequence=1, transactional=True),
                           transactional_id="zombie")
    assert late.error_code == 47


def test_open_transactions_survive_a_clean_restart_and_a_sigkill(tmp_path):
    topic = "txn-restart"
    with EmbeddedBroker(tmp_path / "broker", processors=2) as broker:
        create_topic(broker, topic)
        a, b = TxnProducer(broker), TxnProducer(broker)
        plain(broker, topic, b"p0")
        a.send(topic, 0, [(None, b"a0")])
        b.send(topic, 0, [(None, b"b0")])
        broker.restart()  # clean: the producer state comes from the snapshot
        assert latest(broker, topic, 1) == 1
        a.end(topic, 0, commit=False)
        broker.kill()  # no clean close: recovery rebuilds the state and the index from the log
        broker.start()
        assert latest(broker, topic, 1) == 2  # B still open
        b.end(topic, 0, commit=True)
        assert read_mmlog(broker, topic, COMMITTED, 2) == [b"p0", b"b0"]
        assert read_confluent(broker, topic, COMMITTED, 2) == [b"p0", b"b0"]
        part = raw_fetch(broker, topic, 0, isolation=1)
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [(a.pid, 1)]


def test_a_marker_for_a_partition_without_data_is_appended_and_ends_nothing(broker):
    topic = "txn-empty"
    create_topic(broker, topic)
    pid = new_producer_id(broker)
    assert write_markers(broker, [(pid, 0, False, 0, {topic: [0]})]) == {(pid, topic, 0): 0}
    plain(broker, topic, b"x")
    assert latest(broker, topic, 1) == 2
    assert read_mmlog(broker, topic, COMMITTED, 1) == [b"x"]
