"""Transactions as Kafka clients use them: librdkafka's transactional producer, read_committed
consumers, fencing, timeouts, offsets committed with a transaction, and mmlog's own producer."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.errors import ProducerFenced
from mmlog.testing import EmbeddedBroker

CONFIG = {"transaction.state.log.num.partitions": 4,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("txn"), processors=2, config=CONFIG) as b:
        yield b


def txn_producer(broker, txn_id, **more):
    return confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                                     "linger.ms": 1, **more})


def read(broker, topic, isolation, expect: int, partitions=(0,), group=None, settle=0.5):
    """The values a consumer of `isolation` reads from the start: until it has `expect` of them (or 20 s
    pass), then `settle` s more, so that a record that should not be seen has its chance to show."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group or "reader",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in partitions])
        values, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and not msg.error():
                values.append(msg.value())
            if len(values) >= expect:
                deadline = min(deadline, time.monotonic() + settle)
        return values
    finally:
        consumer.close()


def test_read_committed_sees_committed_transactions_only_and_read_uncommitted_sees_all(broker):
    p = txn_producer(broker, "visibility")
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(3):
        p.produce("visible", b"committed-%d" % i, partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce("visible", b"aborted", partition=0)
    p.flush(10)  # in the log before the abort (librdkafka's abort drops what it has not sent)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce("visible", b"after", partition=0)
    p.commit_transaction(20)
    assert read(broker, "visible", "read_committed", 4) == [b"committed-0", b"committed-1", b"committed-2", b"after"]
    assert read(broker, "visible", "read_uncommitted", 5) == [b"committed-0", b"committed-1", b"committed-2",
                                                           b"aborted", b"after"]


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(broker):
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("open", b"before", partition=0)
    plain.flush(10)
    p = txn_producer(broker, "holder")
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("open", b"pending", partition=0)
    p.flush(10)
    plain.produce("open", b"plain-after", partition=0)
    plain.flush(10)
    assert read(broker, "open", "read_committed", 1) == [b"before"]  # stops at the open transaction
    assert read(broker, "open", "read_uncommitted", 3) == [b"before", b"pending", b"plain-after"]
    p.commit_transaction(20)
    assert read(broker, "open", "read_committed", 3) == [b"before", b"pending", b"plain-after"]


def make_topic(broker, name, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def test_aborting_at_once_after_produce_while_partitions_are_being_added_is_not_fatal(broker):
    """librdkafka sends AddPartitionsToTxn for a transaction begun right after a commit while the
    commit's markers are still written (CONCURRENT_TRANSACTIONS); an abort before its retry still
    sends EndTxn(abort), which finds nothing open: the abort succeeds and the producer goes on."""
    make_topic(broker, "quick-abort", 3)
    p = txn_producer(broker, "quick-abort")
    p.init_transactions(20)
    committed = []
    for i in range(24):
        p.begin_transaction()
        for k in range(3):
            p.produce("quick-abort", b"aborted-%d-%d" % (i, k), partition=k)
        time.sleep((i % 12) / 1000)  # 0 .. 11 ms: before, while and after AddPartitionsToTxn is answered
        p.abort_transaction(20)  # raised INVALID_TXN_STATE, fatal (issue: abort right after produce)
        p.begin_transaction()
        for k in range(3):
            committed.append(b"committed-%d-%d" % (i, k))
            p.produce("quick-abort", committed[-1], partition=k)
        time.sleep((i % 12) / 1000)
        p.commit_transaction(20)  # right after produce too: commit itself waits for the records
    got = read(broker, "quick-abort", "read_committed", len(committed), partitions=(0, 1, 2))
    assert sorted(got) == sorted(committed)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker):
    first = txn_producer(broker, "fencing")
    first.init_transactions(20)
    first.begin_transaction()
    first.produce("fenced", b"zombie", partition=0)
    first.flush(10)
    second = txn_producer(broker, "fencing")
    second.init_transactions(30)  # aborts the first one's open transaction
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        first.commit_transaction(10)
    assert caught.value.args[0].fatal() or caught.value.args[0].code() in (
        confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED)
    second.begin_transaction()
    second.produce("fenced", b"winner", partition=0)
    second.commit_transaction(20)
    assert read(broker, "fenced", "read_committed", 1) == [b"winner"]


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(broker):
    p = txn_producer(broker, "slowpoke", **{"transaction.timeout.ms": 1000})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("expired", b"too-late", partition=0)
    p.flush(10)
    with Admin(broker.bootstrap) as admin:  # the coordinator aborts it after its 1 s: the abort marker moves the LSO
        deadline = time.monotonic() + 20
        while admin.offsets("expired", read_committed=True)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("expired", b"later", partition=0)
    plain.flush(10)
    assert read(broker, "expired", "read_committed", 1) == [b"later"]  # aborted: the LSO moved past it
    with pytest.raises(confluent_kafka.KafkaException):
        p.commit_transaction(10)  # fenced by the coordinator's epoch bump


def test_offsets_sent_with_a_transaction_are_committed_with_it(broker):
    group = "transform"
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce("transform-in", b"in-%d" % i, partition=0)
    plain.flush(10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    p = txn_producer(broker, "transformer")
    p.init_transactions(20)
    try:
        for commit, offset in ((False, 5), (True, 7)):
            p.begin_transaction()
            p.produce("transformed", b"out-%d" % offset, partition=0)
            p.send_offsets_to_transaction([TopicPartition("transform-in", 0, offset)],
                                          consumer.consumer_group_metadata())
            (p.commit_transaction if commit else p.abort_transaction)(20)
        # The commit is answered once it is decided; the offsets land with the markers, just after.
        deadline, seen = time.monotonic() + 10, []
        while time.monotonic() < deadline and seen[-1:] != [7]:
            seen.append(consumer.committed([TopicPartition("transform-in", 0)], timeout=10)[0].offset)
            time.sleep(0.05)
    finally:
        consumer.close()
    assert seen[-1] == 7 and 5 not in seen  # the aborted transaction's 5 never counted
    assert read(broker, "transformed", "read_committed", 1) == [b"out-7"]


def test_mmlogs_own_transactional_producer_commits_and_aborts(broker):
    with Producer(broker.bootstrap, transactional_id="mmlog-own", linger_ms=1) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("own", b"kept", partition=0)
        p.send_many("own", [b"kept-bulk-%d" % i for i in range(3)], partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("own", b"dropped", partition=0)
        p.abort_transaction()
        with pytest.raises(Exception):
            p.send("own", b"outside", partition=0)  # no transaction begun
    assert read(broker, "own", "read_committed", 4) == [b"kept", b"kept-bulk-0", b"kept-bulk-1", b"kept-bulk-2"]


def test_mmlogs_producer_is_fenced_by_a_newer_one(broker):
    old = Producer(broker.bootstrap, transactional_id="mmlog-fenced", linger_ms=1)
    try:
        old.init_transactions()
        new = Producer(broker.bootstrap, transactional_id="mmlog-fenced", linger_ms=1)
        new.init_transactions()
        old.begin_transaction()
        old.send("own-fenced", b"zombie", partition=0)
        with pytest.raises(ProducerFenced):
            old.commit_transaction(timeout=10)
        new.close()
    finally:
        old.close(timeout=1)


def test_mmlogs_producer_commits_consumer_offsets_with_its_transaction(broker):
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("own-in", b"x", partition=0)
    plain.flush(10)
    with Producer(broker.bootstrap, transactional_id="mmlog-offsets", linger_ms=1) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({("own-in", 0): 1}, "own-group")  # offsets alone, no record
        p.commit_transaction()
        p.begin_transaction()
        p.send_offsets_to_transaction({("own-in", 0): 0}, "own-group")
        p.abort_transaction()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "own-group"})
    try:
        deadline, offset = time.monotonic() + 10, None
        while time.monotonic() < deadline and offset != 1:
            offset = consumer.committed([TopicPartition("own-in", 0)], timeout=10)[0].offset
            time.sleep(0.05)
    finally:
        consumer.close()
    assert offset == 1


def test_group_lag_counts_up_to_the_last_stable_offset(broker):
    from mmlog.client.admin import Admin
    from mmlog.client.consumer import Consumer

    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        plain.produce("lagged", b"p-%d" % i, partition=0)
    plain.flush(10)
    with Consumer(broker.bootstrap, group_id="lagging", enable_auto_commit=False) as c:
        c.commit({("lagged", 0): 3})
    p = txn_producer(broker, "lag-maker")
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("lagged", b"open-1", partition=0)
    p.produce("lagged", b"open-2", partition=0)
    p.flush(10)
    with Admin(broker.bootstrap) as admin:
        assert [o.lag for o in admin.group_offsets("lagging").values()] == [0]  # undecided: nothing to read yet
        p.commit_transaction(20)
        deadline, lag = time.monotonic() + 10, None
        while time.monotonic() < deadline and lag != 3:  # two records and their marker
            [lag] = [o.lag for o in admin.group_offsets("lagging").values()]
            time.sleep(0.05)
    assert lag == 3
