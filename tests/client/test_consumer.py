"""The consumer against a real broker: round trips, positions, resets, wake-up latency, faults, interop."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from mmlog.client import Consumer, ConsumerRecord, TopicPartition
from mmlog.client.connection import ConnectionClosed
from mmlog.client.consumer import NoOffsetForPartition, WakeupError
from mmlog.errors import OffsetOutOfRange
from mmlog.protocol import records as rec
from mmlog.testing import EmbeddedBroker
from tests.client.consumer_tools import (
    create_topic,
    delete_topic,
    produce,
    values,
    write_marker,
)
from mmlog.testing.scrape import METRICS_ON, scrape
from mmlog.testing.wait import wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker (two processors) shared by the module's tests; each test uses its own topics."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config=METRICS_ON) as b:
        yield b


@pytest.fixture
def topic(request, broker):
    """A fresh one-partition topic named after the test."""
    name = request.node.name.replace("[", "-").replace("]", "")[:100]
    create_topic(broker, name)
    return name


@pytest.fixture
def consumer(broker):
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200) as c:
        yield c


def drain(consumer, count: int, timeout: float = 30.0) -> list[ConsumerRecord]:
    """Poll until `count` records arrived (fail after timeout)."""
    out: list[ConsumerRecord] = []
    wait_for(lambda: out.extend(consumer.poll(0.5)) or len(out) >= count, timeout, f"{count} records",
             interval=0, retry=(), show=lambda: len(out))
    return out


def parked(broker) -> float:
    """Fetches parked in the broker's purgatories now."""
    return scrape(broker).get("kafka_server_delayedoperationpurgatory_purgatorysize")


# ------------------------------------------------------------------ round trips


def test_round_trip_keys_values_headers_and_nulls(broker, topic, consumer):
    sent = [
        rec.Record(b"value", b"key", [("trace", b"abc"), ("empty", b""), ("null", None)], 1_700_000_000_000),
        rec.Record(None, b"tombstone", [], 1_700_000_000_001),
        rec.Record(b"", None, [], 1_700_000_000_002),
        rec.Record(b"\x00\xff" * 100, b"", [("k", b"v")], 1_700_000_000_003),
    ]
    produce(broker, topic, 0, sent)
    consumer.assign([(topic, 0)])
    got = drain(consumer, 4)
    assert [(r.topic, r.partition, r.offset) for r in got] == [(topic, 0, i) for i in range(4)]
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == [
        (s.key, s.value, s.headers, s.timestamp) for s in sent]
    assert all(r.timestamp_type == 0 for r in got)
    assert consumer.position((topic, 0)) == 4


def test_order_within_a_partition_across_many_batches(broker, topic, consumer):
    for start in range(0, 3000, 300):
        produce(broker, topic, 0, values(300, start))
    consumer.assign([TopicPartition(topic, 0)])
    got = drain(consumer, 3000)
    assert [r.offset for r in got] == list(range(3000))
    assert [r.value for r in got] == [b"v%d" % i for i in range(3000)]


def test_several_partitions_each_in_order(broker):
    create_topic(broker, "multi", partitions=3)
    for p in range(3):
        for start in (0, 50):
            produce(broker, "multi", p, values(50, start, prefix=b"p%d-" % p))
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([("multi", p) for p in range(3)] + [("multi", 0)])  # duplicates collapse
        assert c.assignment() == {TopicPartition("multi", p) for p in range(3)}
        got = drain(c, 300)
        for p in range(3):
            mine = [r for r in got if r.partition == p]
            assert [r.offset for r in mine] == list(range(100))
            assert [r.value for r in mine] == [b"p%d-%d" % (p, i) for i in range(100)]


def test_small_fetches_cut_batches_and_lose_nothing(broker, topic):
    """With partition fetches smaller than a batch, the broker cuts batches; every record arrives once."""
    for start in range(0, 400, 40):
        produce(broker, topic, 0, values(40, start, prefix=b"x" * 50))
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=1000,
                  fetch_max_bytes=1000) as c:
        c.assign([(topic, 0)])
        got = drain(c, 400)
    assert [r.offset for r in got] == list(range(400))


def test_gzip_and_control_batches(broker, topic, consumer):
    produce(broker, topic, 0, values(3), compression=1)
    write_marker(broker, topic, 0, pid=7)  # a transaction marker (for no open transaction: it ends nothing)
    produce(broker, topic, 0, values(2, 3))
    consumer.assign([(topic, 0)])
    got = drain(consumer, 5)
    assert [r.offset for r in got] == [0, 1, 2, 4, 5]  # offset 3 is the transaction marker
    assert [r.value for r in got] == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_poll_batch_gives_numpy_columns(broker, topic, consumer):
    produce(broker, topic, 0, [(b"k%d" % i, b"value-%d" % i) for i in range(100)])
    consumer.assign([(topic, 0)])
    chunks = []
    deadline = time.monotonic() + 10
    while sum(map(len, chunks)) < 100 and time.monotonic() < deadline:
        chunks += consumer.poll_batch(0.5)
    offsets = [o for arrays in chunks for o in arrays.offsets.tolist()]
    assert offsets == list(range(100))
    arrays = chunks[0]
    assert arrays.topic == topic and arrays.partition == 0
    assert arrays.values()[:2] == [b"value-0", b"value-1"] and bytes(arrays.value_view(1)) == b"value-1"
    assert arrays.keys()[0] == b"k0"
    assert consumer.position((topic, 0)) == 100


# ------------------------------------------------------------------ positions


def test_rewind_and_replay(broker, topic, consumer):
    produce(broker, topic, 0, values(20))
    tp = (topic, 0)
    consumer.assign([tp])
    first = drain(consumer, 20)
    consumer.seek(tp, 5)
    assert consumer.position(tp) == 5
    replay = drain(consumer, 15)
    assert [r.offset for r in replay] == list(range(5, 20))
    assert [r.value for r in replay] == [r.value for r in first[5:]]
    consumer.seek_to_beginning(tp)
    assert consumer.position(tp) == 0
    assert [r.offset for r in drain(consumer, 20)] == list(range(20))


def test_seek_while_iterating_stops_the_stale_chunk(broker, topic, consumer):
    produce(broker, topic, 0, values(50))
    tp = (topic, 0)
    consumer.assign([tp])
    stream = iter(consumer)
    seen = [next(stream).offset for _ in range(3)]
    consumer.seek(tp, 40)  # the iterator holds 47 more records of the old chunk: they must not come
    seen += [next(stream).offset for _ in range(10)]
    assert seen == [0, 1, 2] + list(range(40, 50))


def test_seek_to_end_then_new_data(broker, topic, consumer):
    produce(broker, topic, 0, values(10))
    tp = (topic, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 10
    assert consumer.poll(0.3) == []
    produce(broker, topic, 0, values(3, 10))
    got = drain(consumer, 3)
    assert [(r.offset, r.value) for r in got] == [(10, b"v10"), (11, b"v11"), (12, b"v12")]


def test_latest_is_the_default_start(broker, topic):
    produce(broker, topic, 0, values(5))
    with Consumer(broker.bootstrap) as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 5
        produce(broker, topic, 0, values(1, 5))
        assert [r.offset for r in drain(c, 1)] == [5]


def test_offsets_and_highwater(broker, topic, consumer):
    produce(broker, topic, 0, values(7))
    tp = TopicPartition(topic, 0)
    assert consumer.partitions_for(topic) == {0}
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([(topic, 0)]) == {tp: 7}
    consumer.assign([tp])
    drain(consumer, 7)
    assert consumer.highwater(tp) == 7


def test_offset_out_of_range_resets_earliest(broker, topic):
    produce(broker, topic, 0, values(5))
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 1000)
        assert [r.offset for r in drain(c, 5)] == [0, 1, 2, 3, 4]


def test_offset_out_of_range_resets_latest(broker, topic):
    produce(broker, topic, 0, values(5))
    with Consumer(broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 1000)
        assert c.poll(1.0) == []
        assert c.position((topic, 0)) == 5
        produce(broker, topic, 0, values(1, 5))
        assert [r.offset for r in drain(c, 1)] == [5]


def test_offset_out_of_range_with_reset_none_raises_until_seek(broker, topic):
    produce(broker, topic, 0, values(5))
    with Consumer(broker.bootstrap, auto_offset_reset="none") as c:
        tp = (topic, 0)
        c.assign([tp])
        with pytest.raises(NoOffsetForPartition):
            c.poll(1.0)
        c.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRange, match="offset 1000"):
            drain(c, 1)
        with pytest.raises(OffsetOutOfRange):  # still: the application must seek
            c.poll(0.1)
        assert c.position(tp) == 1000
        c.seek(tp, 3)
        assert [r.offset for r in drain(c, 2)] == [3, 4]


def test_bad_arguments(broker):
    with pytest.raises(ValueError, match="auto_offset_reset"):
        Consumer(broker.bootstrap, auto_offset_reset="smallest")
    with pytest.raises(ValueError, match="fetch_max_bytes"):
        Consumer(broker.bootstrap, fetch_max_bytes=0)
    with Consumer(broker.bootstrap) as c:
        with pytest.raises(TypeError):
            c.assign(["topic-without-partition"])
        with pytest.raises(ValueError, match="not assigned"):
            c.seek(("x", 0), 1)
        c.assign([("x", 0)])
        with pytest.raises(ValueError, match="offset"):
            c.seek(("x", 0), -1)


# ------------------------------------------------------------------ the never-ending stream


def test_an_iterating_consumer_wakes_on_a_produce(broker, topic):
    """The iterator blocks on a long-polled Fetch; a produce completes it. The Fetch would park for two
    minutes otherwise, past each record's deadline here; how soon it comes is tools/bench_long_poll.py's."""
    received: list[int] = []
    with Consumer(broker.bootstrap, fetch_max_wait_ms=120_000, request_timeout_ms=180_000) as c:
        c.assign([(topic, 0)])
        c.position((topic, 0))

        def iterate():
            try:
                for record in c:
                    received.append(record.offset)
            except WakeupError:
                pass

        thread = threading.Thread(target=iterate, daemon=True)
        thread.start()
        for i in range(5):
            wait_for(lambda: parked(broker) >= 1, what="the Fetch parked at the broker")
            produce(broker, topic, 0, values(1, i))
            wait_for(lambda: len(received) > i, timeout=60, what=f"record {i} from the iterating consumer")
        c.wakeup()
        thread.join(30)
        assert not thread.is_alive()
    assert received == [0, 1, 2, 3, 4]


def test_wakeup_interrupts_a_blocked_poll(broker, topic, consumer):
    consumer.assign([(topic, 0)])
    threading.Timer(0.2, consumer.wakeup).start()
    with pytest.raises(WakeupError):  # not a poll that returns empty at its timeout
        consumer.poll(60)
    assert consumer.poll(0) == []  # usable afterwards


# ------------------------------------------------------------------ faults


def test_a_consumer_lives_through_a_broker_restart(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1) as b:
        create_topic(b, "restart")
        produce(b, "restart", 0, values(10))
        with Consumer(b.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      request_timeout_ms=30_000) as c:
            c.assign([("restart", 0)])
            got = drain(c, 10)
            b.stop()
            assert c.poll(0.5) == []  # the broker is gone: nothing, and no error yet
            b.start()
            produce(b, "restart", 0, values(10, 10))
            got += drain(c, 10, timeout=20)
    assert [r.offset for r in got] == list(range(20))
    assert [r.value for r in got] == [b"v%d" % i for i in range(20)]


def test_a_topic_that_appears_later_is_picked_up(broker):
    """Assigned before it exists: metadata is retried (with growing backoff) until the topic is there."""
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", reconnect_backoff_max_ms=200) as c:
        c.assign([("later", 0)])
        assert c.poll(0.3) == []
        create_topic(broker, "later")
        produce(broker, "later", 0, values(3))
        assert [r.offset for r in drain(c, 3)] == [0, 1, 2]


def test_a_deleted_and_recreated_topic_is_read_again(broker):
    """UNKNOWN_TOPIC_OR_PARTITION on fetch: refresh and retry; then OFFSET_OUT_OF_RANGE on the new, shorter log:
    reset to earliest. The consumer rides through both without an error."""
    create_topic(broker, "reborn")
    produce(broker, "reborn", 0, values(10))
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  reconnect_backoff_max_ms=200) as c:
        c.assign([("reborn", 0)])
        assert len(drain(c, 10)) == 10
        delete_topic(broker, "reborn")
        assert c.poll(0.5) == []
        create_topic(broker, "reborn")
        produce(broker, "reborn", 0, values(2, prefix=b"new"))
        got = drain(c, 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"new0"), (1, b"new1")]


def test_an_unreachable_broker_is_a_clear_error_after_a_bounded_wait():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with Consumer(f"127.0.0.1:{port}", request_timeout_ms=1000) as c:
            c.assign([("t", 0)])
            # Raised after request_timeout_ms, not a poll that returns empty at its timeout.
            with pytest.raises(ConnectionClosed, match=f"no broker reachable at 127.0.0.1:{port}"):
                c.poll(30)
            with pytest.raises(ConnectionClosed):
                c.partitions_for("t")


# ------------------------------------------------------------------ interop


def test_records_from_confluent_kafka_arrive_as_sent(broker):
    """confluent-kafka (librdkafka, murmur2_random) produces keyed records with headers to 3 partitions; the
    mmlog consumer sees each at the partition and offset librdkafka reported, with the same fields."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create_topic(broker, "from-librdkafka", partitions=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                                         "linger.ms": 5})
    reports = {}  # (partition, offset) librdkafka reported -> (key, value, headers) sent

    def delivered(err, msg, sent):
        assert err is None, err
        reports[(msg.partition(), msg.offset())] = sent

    for i in range(300):
        key = None if i % 10 == 0 else b"user-%d" % (i % 17)
        value = b"payload-%d" % i if i % 25 else None
        headers = [("seq", b"%d" % i), ("null", None)] if i % 3 == 0 else None
        producer.produce("from-librdkafka", value=value, key=key, headers=headers,
                         on_delivery=lambda err, msg, sent=(key, value, headers): delivered(err, msg, sent))
    assert producer.flush(30) == 0
    del producer
    assert len(reports) == 300
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([("from-librdkafka", p) for p in range(3)])
        got = drain(c, 300)
    seen = {(r.partition, r.offset): (r.key, r.value, list(r.headers) or None) for r in got}
    assert seen == reports
    keyed = [r for r in got if r.key is not None]
    assert len({r.partition for r in keyed}) > 1
    for r in keyed:  # Java's murmur2 placement: the same key always lands on the same partition
        assert r.partition == next(x.partition for x in keyed if x.key == r.key)
