"""The Producer against a real broker, read back with the blocking BrokerConnection + Fetch.

Also, without a broker: the batch-encoding kernel against records.build_batch, and the
sender's rule that a retry never reorders a partition.
"""

import collections
import contextlib
import itertools
import os
import random
import socket
import threading
import time

import numpy as np
import pytest

from mmlog.client import encode
from mmlog.client.channel import Channel, _Done
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.futures import ProducerTimeout, RecordMetadata
from mmlog.client.partitioner import partition_for_key_py
from mmlog.client.producer import Producer
from mmlog.errors import KafkaError, KafkaStorageError, MessageTooLarge, UnknownTopicOrPartition
from mmlog.protocol.messages import fetch
from mmlog.protocol.records import decode_records, iter_batches
from mmlog.testing import EmbeddedBroker
from mmlog.testing.wait import wait_for

PARTITIONS = 6  # of every auto-created topic here


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2,
                        config={"num.partitions": PARTITIONS}) as b:
        yield b


def fetch_all(bootstrap, topic, partition, start=0):
    """Every record of a partition from `start` to its high watermark (Record objects)."""
    host, port = bootstrap.rsplit(":", 1)
    out = []
    offset = start
    with BrokerConnection(host, int(port)) as conn:
        while True:
            body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
                max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                          "partition_max_bytes": 8 << 20}]}]))
            part = body.responses[0].partitions[0]
            assert part.error_code == 0, part
            data = part.records
            for pos, _ in iter_batches(data):
                for record in decode_records(data, pos):
                    if record.offset >= offset:
                        out.append(record)
                        offset = record.offset + 1
            if offset >= part.high_watermark or not data:
                return out


def topic_name(prefix):
    return f"{prefix}-{random.randrange(1 << 30)}"


# ---------------------------------------------------------------- no broker: encoding kernel


def random_records(rng, n):
    values = [None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 5, 63, 64, 200, 300, 20000]))
              for _ in range(n)]
    keys = None if rng.random() < 0.3 else [None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 70))
                                             for _ in range(n)]
    headers = None if rng.random() < 0.5 else [
        [(f"h{j}", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 200)))
         for j in range(rng.randint(0, 3))] for _ in range(n)]
    stamps = [1_700_000_000_000 + rng.randint(-10**9, 10**9) for _ in range(n)]
    return values, keys, headers, stamps


def test_kernel_batches_equal_build_batch_bytes_for_random_records():
    rng = random.Random(1)
    for _ in range(300):
        n = rng.randint(1, 40)
        values, keys, headers, stamps = random_records(rng, n)
        reference = encode.build_py(values, keys, headers, stamps)
        sections = [encode.encode_header_section(h) for h in headers] if headers is not None else None
        # the accumulator's path (lists) and send_many's path (columns, any order, many batches)
        assert bytes(encode.build_lists(values, keys, sections, stamps)) == bytes(reference)
        one = encode.build_one(encode.Column.from_list(values, all_null_ok=True),
                               encode.Column.from_list(keys) if keys is not None else None,
                               encode.Column.from_list(sections) if sections is not None else None,
                               np.array(stamps, dtype=np.int64))
        assert bytes(one) == bytes(reference)


def test_one_kernel_call_encodes_many_batches_as_build_batch_would():
    """build_runs: what a sender step encodes at once, batches of any mix of keys, headers and nulls."""
    rng = random.Random(11)
    for _ in range(60):
        runs = [random_records(rng, rng.randint(1, 12)) for _ in range(rng.randint(1, 8))]
        sections = [[encode.encode_header_section(h) for h in headers] if headers is not None else None
                    for _, _, headers, _ in runs]
        built = encode.build_runs([v for v, _, _, _ in runs], [k for _, k, _, _ in runs], sections,
                                  [t for _, _, _, t in runs])
        assert [bytes(b) for b in built] == [bytes(encode.build_py(*run)) for run in runs]


def test_kernel_cuts_many_batches_from_a_permuted_run():
    rng = random.Random(2)
    values, keys, _, stamps = random_records(rng, 200)
    keys = [k if k is not None else b"" for k in keys or [b"k"] * 200]
    order = np.array(rng.sample(range(200), 200), dtype=np.int64)
    bounds = np.array([0, 1, 50, 51, 130, 200], dtype=np.int64)
    buf, positions = encode.build(encode.Column.from_list(values, all_null_ok=True), encode.Column.from_list(keys),
                                  None, np.array(stamps, dtype=np.int64), order, bounds)
    for j in range(len(bounds) - 1):
        chosen = order[bounds[j]:bounds[j + 1]].tolist()
        expected = encode.build_py([values[i] for i in chosen], [keys[i] for i in chosen], None,
                                   [stamps[i] for i in chosen])
        assert bytes(buf[positions[j]:positions[j + 1]]) == bytes(expected)


def test_cut_batches_kernel_equals_reference():
    rng = np.random.default_rng(3)
    for _ in range(50):
        sizes = rng.integers(1, 500, size=rng.integers(1, 300)).astype(np.int64)
        cuts = np.unique(np.concatenate(([0, len(sizes)], rng.integers(0, len(sizes), size=4)))).astype(np.int64)
        limit, most = int(rng.integers(1, 3000)), int(rng.integers(1, 60))
        np.testing.assert_array_equal(encode.cut_batches(sizes, cuts, limit, most),
                                      encode.cut_batches_py(sizes, cuts, limit, most))


def unconnected_channel():
    """A Channel with no socket: what the sender queues stays in its output queue."""
    channel = Channel.__new__(Channel)
    channel.node_id, channel.host, channel.port, channel.closed = 0, "test", 0, False
    channel._ids, channel._out, channel._inflight = itertools.count(1), collections.deque(), collections.deque()
    return channel


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_request_frames_equal_the_codecs_bytes_and_leave_batches_uncopied(acks):
    """One-batch requests come from a per-partition template, many-batch ones from the codec's parts."""
    from mmlog.client.accumulator import PartitionQueue, RecordAccumulator
    from mmlog.protocol import RequestHeader, encode_request
    from mmlog.protocol.messages import produce

    rng = random.Random(5)
    producer = Producer("127.0.0.1:9", acks=acks, client_id="client-x", request_timeout_ms=12345)
    try:
        sender = producer._sender
        for i in range(60):
            channel = unconnected_channel()
            topics = sorted({f"topic-{rng.randrange(5)}" for _ in range(rng.choice([1, 1, 2, 3]))})
            batches = []
            for topic in topics:
                for partition in rng.sample(range(100), rng.choice([1, 1, 2, 4]) if len(topics) > 1 or i % 2 else 1):
                    data = memoryview(bytearray(rng.randbytes(rng.randrange(1, 3000))))
                    batches.append(RecordAccumulator.built_batch(PartitionQueue(topic, partition), data, 1, 0.0))
            sender._request(channel, batches)
            expected = encode_request(RequestHeader(0, 8, 1, "client-x"), produce.REQUEST(
                acks=acks, timeout_ms=12345, transactional_id=None, topic_data=[
                    {"name": t, "partition_data": [{"index": b.partition, "records": b.data}
                                                   for b in batches if b.topic == t]} for t in topics]))
            queued = [part for part in channel._out if not isinstance(part, _Done)]
            assert b"".join(queued) == bytes(expected)
            big = [b for b in batches if len(b.data) >= 1024 or len(batches) == 1]  # smaller ones may be copied
            assert all(any(isinstance(part, memoryview) and part.obj is b.data.obj for part in queued) for b in big)
    finally:
        producer.close(timeout=0)


@contextlib.contextmanager
def three_batches_in_flight(producer):
    """Holding the I/O lock: three 1-record batches of t-0 in flight in order, as _send leaves them."""
    acc = producer._acc
    producer._partition_counts["t"] = 1
    batches = []
    for i in range(3):
        batch = acc.append("t", 0, b"v%d" % i, None, 0, None, 14, None)[0]._batch
        acc.close_all_open()
        batches.append(batch)
    queue = batches[0].queue
    with producer._io_lock:
        for b in batches:
            queue.closed.remove(b)
            queue.inflight.append(b)
            b.attempts = 1
        yield producer._sender, batches, queue


def test_a_retry_is_dropped_rather_than_reordering_its_partition():
    """Batch A fails with a retriable error while B, sent after it, is written: A must not go behind B."""
    producer = Producer("127.0.0.1:9", retries=5)  # never connects: the sender is driven by hand
    try:
        with three_batches_in_flight(producer) as (sender, batches, queue):
            sender._failed(batches[0], KafkaStorageError("disk hiccup"))
            assert queue.held == [batches[0]] and not batches[0].resolved
            sender._succeeded(batches[1], 10)  # B written after A failed
            sender._failed(batches[2], KafkaStorageError("disk hiccup"))  # C failed: retried (after B)
        assert batches[1].base_offset == 10 and batches[1].error is None
        assert isinstance(batches[0].error, KafkaStorageError) and "reorder" in str(batches[0].error)
        assert batches[0].error.code == KafkaStorageError.code
        assert list(queue.closed) == [batches[2]] and not batches[2].resolved
    finally:
        producer.close(timeout=0)


def test_every_failed_batch_is_retried_in_order_when_none_was_written():
    producer = Producer("127.0.0.1:9", retries=5)
    try:
        with three_batches_in_flight(producer) as (sender, batches, queue):
            for b in batches:  # a lost connection fails everything in flight, in order
                sender._failed(b, ConnectionClosed("broker went away"))
        assert list(queue.closed) == batches and not queue.held and not queue.inflight
        assert batches[0].retry_at > 0  # a retry is scheduled
    finally:
        producer.close(timeout=0)


def test_acks_0_requests_a_lost_connection_left_unwritten_are_retried():
    """acks=0 has no answer to wait for: requests still in the channel's output queue when the
    connection fails get its error (Channel.fail), and their batches go back to be sent again."""
    producer = Producer("127.0.0.1:9", acks=0, retries=5)
    try:
        with three_batches_in_flight(producer) as (sender, batches, queue):
            channel = unconnected_channel()
            channel.sock, peer = socket.socketpair()
            peer.close()
            for b in batches:
                b.data = memoryview(b"batch")
                sender._request(channel, [b])
            assert channel.wants_write and not any(b.resolved for b in batches)
            channel.fail(ConnectionClosed("lost before anything was written"))
            assert list(queue.closed) == batches and not queue.inflight and not queue.held
            assert not any(b.resolved for b in batches)
    finally:
        producer.close(timeout=0)


# ---------------------------------------------------------------- against a broker


def test_round_trip_with_keys_headers_and_nulls(broker):
    topic = topic_name("round")
    records = [
        dict(value=b"plain"),
        dict(value=b"keyed", key=b"user-42"),
        dict(value=None, key=b"tombstone"),
        dict(value=b"", key=b""),
        dict(value="text, sent as utf-8: \u00e9", key="str key"),
        dict(value=b"with headers", headers=[("trace", b"abc"), ("empty", b""), ("null", None)]),
        dict(value=b"stamped", timestamp=1_600_000_000_123),
        dict(value=bytearray(b"bytearray"), key=memoryview(b"mv")),
    ]
    with Producer(broker.bootstrap, linger_ms=1) as producer:
        futures = [producer.send(topic, partition=2, **r) for r in records]
        metas = [f.get(timeout=30) for f in futures]
    assert [m.partition for m in metas] == [2] * len(records)
    assert [m.offset for m in metas] == list(range(len(records)))
    assert metas[6].timestamp == 1_600_000_000_123
    got = fetch_all(broker.bootstrap, topic, 2)
    assert [r.offset for r in got] == list(range(len(records)))
    expected_values = [b"plain", b"keyed", None, b"", "text, sent as utf-8: \u00e9".encode(), b"with headers",
                       b"stamped", b"bytearray"]
    assert [r.value for r in got] == expected_values
    assert [r.key for r in got] == [None, b"user-42", b"tombstone", b"", b"str key", None, None, b"mv"]
    assert got[5].headers == [("trace", b"abc"), ("empty", b""), ("null", None)]
    assert all(r.headers == [] for i, r in enumerate(got) if i != 5)
    assert [r.timestamp for r in got] == [m.timestamp for m in metas]
    assert abs(got[0].timestamp - time.time() * 1000) < 60_000


def test_order_within_a_partition_with_many_batches_in_flight(broker):
    topic = topic_name("order")
    n = 3000
    with Producer(broker.bootstrap, batch_size=2000, linger_ms=0, max_in_flight=8) as producer:
        futures = [producer.send(topic, b"%06d" % i, key=b"same-key") for i in range(n)]
        producer.flush(30)
    metas = [f.get(0) for f in futures]
    partition = partition_for_key_py(b"same-key", PARTITIONS)
    assert {m.partition for m in metas} == {partition}
    offsets = [m.offset for m in metas]
    assert offsets == sorted(offsets) and len(set(offsets)) == n
    got = fetch_all(broker.bootstrap, topic, partition)
    assert [r.value for r in got] == [b"%06d" % i for i in range(n)]
    assert [r.offset for r in got] == offsets


def test_threads_sharing_a_producer_each_keep_their_order(broker):
    topic = topic_name("threads")
    with Producer(broker.bootstrap, batch_size=3000, linger_ms=1) as producer:
        def work(t):
            for i in range(2000):
                producer.send(topic, b"%d:%05d" % (t, i), partition=0)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush(30)
    values = [r.value for r in fetch_all(broker.bootstrap, topic, 0)]
    assert len(values) == 8000
    for t in range(4):
        mine = [v for v in values if v.startswith(b"%d:" % t)]
        assert mine == [b"%d:%05d" % (t, i) for i in range(2000)]


@pytest.mark.parametrize("linger_ms", [0, 1])
def test_threads_awaiting_each_send_all_get_their_own_offsets(broker, linger_ms):
    """Threads each awaiting every send(): one of them at a time does the I/O, the others hand over to the
    I/O thread, and every record is acknowledged with the offset it was stored at, in each thread's order."""
    topic = topic_name("awaiting-threads")
    got = {}
    with Producer(broker.bootstrap, acks=1, linger_ms=linger_ms, max_batch_records=1) as producer:
        def work(t):
            got[t] = [producer.send(topic, b"%d:%04d" % (t, i), partition=0).get(30).offset for i in range(300)]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not producer._driving.locked()
    values = [r.value for r in fetch_all(broker.bootstrap, topic, 0)]
    assert len(values) == 1800
    for t in range(6):
        assert [values[offset] for offset in got[t]] == [b"%d:%04d" % (t, i) for i in range(300)]


def test_keys_land_where_kafka_python_and_confluent_kafka_put_them(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka = pytest.importorskip("kafka")
    keys = [b"alpha", b"bravo", b"", b"user-42"] + [os.urandom(random.randint(1, 30)) for _ in range(60)]
    topic = topic_name("placement")
    with Producer(broker.bootstrap) as producer:
        futures = [producer.send(topic, b"mmlog", key=k) for k in keys]
        mmlog_partitions = [f.get(30).partition for f in futures]

    placed = {}

    def report(err, msg):
        assert err is None, err
        placed[msg.key()] = msg.partition()

    cp = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                                   "linger.ms": 1})
    for k in keys:
        cp.produce(topic, b"confluent", key=k, on_delivery=report)
    assert cp.flush(30) == 0
    assert [placed[k] for k in keys] == mmlog_partitions

    kp = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=1)
    try:
        kp_partitions = [kp.send(topic, b"kafka-python", key=k).get(timeout=30).partition for k in keys]
    finally:
        kp.close(5)
    assert kp_partitions == mmlog_partitions
    assert mmlog_partitions == [partition_for_key_py(k, PARTITIONS) for k in keys]


@pytest.mark.parametrize("acks", [0, 1, -1, "all"])
def test_acks(broker, acks):
    topic = topic_name("acks")
    with Producer(broker.bootstrap, acks=acks, linger_ms=1) as producer:
        futures = [producer.send(topic, b"r%d" % i, partition=1) for i in range(200)]
        producer.flush(30)
    metas = [f.get(0) for f in futures]
    if acks == 0:
        assert {m.offset for m in metas} == {-1}
        # no answer to wait for: poll until the broker has them
        wait_for(lambda: len(fetch_all(broker.bootstrap, topic, 1)) >= 200, what="the 200 records stored")
    else:
        assert [m.offset for m in metas] == list(range(200))
    assert [r.value for r in fetch_all(broker.bootstrap, topic, 1)] == [b"r%d" % i for i in range(200)]


def test_acks_0_a_record_after_a_burst_leaves_without_flush(broker):
    """acks=0 leaves nothing in flight to pace send()'s I/O by, so send() paces it by time (a sendmsg
    for many requests); a record that closes a batch within that pace is sent soon all the same."""
    topic = topic_name("acks0-burst")
    with Producer(broker.bootstrap, acks=0, linger_ms=1000, max_batch_records=1) as producer:
        for i in range(2000):
            producer.send(topic, b"r%d" % i, partition=0)
        producer.send(topic, b"last", partition=0)
        def all_stored():  # no flush(): the last record must go out by itself
            got = fetch_all(broker.bootstrap, topic, 0)
            return got if len(got) >= 2001 else None

        got = wait_for(all_stored, what="all 2001 records stored")
        assert [r.value for r in got] == [b"r%d" % i for i in range(2000)] + [b"last"]


@pytest.mark.parametrize("acks, blocking, waits", [(1, False, True), (1, True, False), (0, False, False)])
def test_a_send_closing_a_batch_waits_for_the_io_threads_step_only_when_that_is_short(
        broker, acks, blocking, waits):
    """With the I/O lock held by the I/O thread, a send() that closes a batch waits (up to KICK_WAIT) to do
    its step after it: the I/O thread may be stuck waiting for the GIL that send()'s thread holds. Not while
    it connects or fetches metadata (`blocking`), and not with acks=0 (no answers waiting to be read)."""
    from mmlog.client.producer_io import KICK_WAIT

    topic = topic_name("kick-wait")
    with Producer(broker.bootstrap, acks=acks, linger_ms=1000, max_batch_records=1) as producer:
        producer.send(topic, b"warm", partition=0).get(30)
        sender = producer._sender
        producer._io_lock = lock = WaitsSeen(producer._io_lock)
        with lock:  # as the I/O thread mid-step
            sender.blocking = blocking
            sender.next_kick = 0.0
            producer.send(topic, b"closes its batch", partition=0)
            sender.blocking = False
        seen = list(lock.waits.get(threading.get_ident(), []))  # the send()'s (flush() may wait for the lock too)
        producer.flush(30)
    assert seen == ([KICK_WAIT] if waits else [])


class WaitsSeen:
    """A lock that notes, per thread, the timeout of every acquire that waits for it (not a try, not a block)."""

    def __init__(self, lock) -> None:
        self.lock, self.waits = lock, {}

    def acquire(self, blocking=True, timeout=-1):
        if blocking and timeout > 0:
            self.waits.setdefault(threading.get_ident(), []).append(timeout)
        return self.lock.acquire(blocking, timeout)

    def release(self):
        self.lock.release()

    def __enter__(self):
        self.lock.acquire()
        return self

    def __exit__(self, *exc):
        self.lock.release()


def test_callbacks_run_once_per_record_in_order_within_a_partition(broker):
    topic = topic_name("callbacks")
    calls = []
    with Producer(broker.bootstrap, batch_size=500, linger_ms=2) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=i % 3,
                                 callback=lambda md, exc, i=i: calls.append((i, md, exc)))
                   for i in range(600)]
        late = []
        futures[0].add_callback(lambda md, exc: late.append(md))  # possibly already done: runs at once
        producer.flush(30)
    assert late and isinstance(late[0], RecordMetadata)
    assert sorted(i for i, _, _ in calls) == list(range(600))
    assert all(exc is None for _, _, exc in calls)
    for p in range(3):
        offsets = [md.offset for i, md, _ in calls if i % 3 == p]
        assert offsets == list(range(200))


def test_send_many_fixed_size_values_and_keys_are_byte_exact(broker):
    topic = topic_name("many")
    rng = np.random.default_rng(4)
    n = 20_000
    values = rng.integers(0, 256, size=(n, 40), dtype=np.uint8)
    keys = [b"key-%d" % (i % 997) for i in range(n)]
    with Producer(broker.bootstrap, batch_size=64 * 1024) as producer:
        result = producer.send_many(topic, values, keys=keys).result(timeout=60)
    expected_partitions = np.array([partition_for_key_py(k, PARTITIONS) for k in keys], dtype=np.int32)
    np.testing.assert_array_equal(result.partitions, expected_partitions)
    assert (result.offsets >= 0).all()
    for p in range(PARTITIONS):
        got = fetch_all(broker.bootstrap, topic, p)
        mine = np.flatnonzero(expected_partitions == p)
        assert len(got) == len(mine)
        # offsets follow the input order within the partition, values and keys byte-exact
        np.testing.assert_array_equal(result.offsets[mine], np.arange(len(mine)))
        assert [r.value for r in got] == [values[i].tobytes() for i in mine]
        assert [r.key for r in got] == [keys[i] for i in mine]


def test_send_many_other_forms(broker):
    topic = topic_name("forms")
    with Producer(broker.bootstrap, batch_size=4096) as producer:
        # (buffer, offsets), one partition for all, explicit timestamps
        buf = b"onetwothreefour"
        r1 = producer.send_many(topic, (buf, [0, 3, 6, 11, 15]), partition=4,
                                timestamps=[1, 2, 3, 4]).result(30)
        # a list with None and str values, null keys: sticky, batch after batch
        values = [b"a", None, "c", b""] * 500
        r2 = producer.send_many(topic, values).result(30)
        # a per-record partition array
        r3 = producer.send_many(topic, [b"x", b"y", b"z"], partition=np.array([5, 0, 5])).result(30)
        assert len(producer.send_many(topic, []).result(1).offsets) == 0
    got4 = fetch_all(broker.bootstrap, topic, 4)
    first = [r for r in got4 if r.offset in set(r1.offsets.tolist())]
    assert [r.value for r in first] == [b"one", b"two", b"three", b"four"]
    assert [r.timestamp for r in first] == [1, 2, 3, 4]
    assert r1.partitions.tolist() == [4] * 4
    assert len(set(r2.partitions.tolist())) > 1  # sticky: batches went to several partitions
    by_partition = {}
    for i, (p, o) in enumerate(zip(r2.partitions.tolist(), r2.offsets.tolist())):
        by_partition.setdefault(p, {})[o] = values[i]
    for p, offsets in by_partition.items():
        stored = {r.offset: r.value for r in fetch_all(broker.bootstrap, topic, p)}
        for o, v in offsets.items():
            assert stored[o] == (v.encode() if isinstance(v, str) else v)
    assert r3.partitions.tolist() == [5, 0, 5]
    assert r3.offsets[2] == r3.offsets[0] + 1


def test_errors_are_typed_and_carry_kafka_codes(broker):
    topic = topic_name("errors")
    with Producer(broker.bootstrap, max_request_size=10_000) as producer:
        with pytest.raises(UnknownTopicOrPartition) as info:
            producer.send(topic, b"v", partition=PARTITIONS)
        assert info.value.code == 3
        with pytest.raises(MessageTooLarge) as info:
            producer.send(topic, b"x" * 20_000)
        assert info.value.code == 10
        with pytest.raises(TypeError):
            producer.send(topic, 12345)
    with pytest.raises(ValueError):
        Producer(broker.bootstrap, acks=2)
    with pytest.raises(ValueError):
        Producer("no-port-here")


def test_batch_1_with_a_deep_pipeline_keeps_order_and_dense_offsets(broker):
    """One record a request, 100 requests in flight: the broker appends them in groups (at most
    dispatch.MAX_GROUP a group), answers in order, and the producer reads the answers by template."""
    topic = topic_name("deep")
    n = 2000
    with Producer(broker.bootstrap, max_batch_records=1, linger_ms=5, max_in_flight=100) as producer:
        futures = [producer.send(topic, b"%05d" % i, partition=1) for i in range(n)]
        producer.flush(30)
    assert [f.get(0).offset for f in futures] == list(range(n))
    assert [r.value for r in fetch_all(broker.bootstrap, topic, 1)] == [b"%05d" % i for i in range(n)]


def test_a_get_after_a_burst_of_sends_is_answered_at_once(broker):
    """While send() drives the sockets, the I/O thread stays out of them; a thread that then waits
    (get, flush) drives them itself until its batch is done, or hands them back at once, rather than
    leaving them for the I/O thread's next look."""
    topic = topic_name("handover")
    with Producer(broker.bootstrap, max_batch_records=10, linger_ms=1000) as producer:
        sender, waits, wakes = producer._sender, [], []
        wake, wait_on = sender.wake, producer._acc.on_wait

        def on_wait(batch, timeout):  # a thread is about to block: had send() driven, did it wait itself or wake?
            drove, before = bool(sender.last_kick), len(wakes)
            done = wait_on(batch, timeout)
            waits.append((drove, done or len(wakes) > before))
            return done

        producer._acc.on_wait = on_wait  # the partition's queue takes it when the first send makes it
        sender.wake = lambda: (wakes.append(threading.get_ident()), wake())
        producer.send(topic, b"warm", partition=0).get(10)
        for _ in range(5):
            futures = [producer.send(topic, b"x", partition=0) for _ in range(210)]  # closes 21 batches
            waits.clear()
            assert futures[-1].get(10).offset == futures[0].get(0).offset + 209
            # Driven to the end, or handed back: a get() that blocks after send() drove wakes the I/O
            # thread, rather than leaving the batches to its next look (the linger, or its timer).
            assert all(served for drove, served in waits if drove), waits


def test_an_awaited_send_is_answered_on_the_waiting_thread(broker):
    """A get() waiting for its batch reads the answer itself (step, poll, step): an awaited send() costs one
    wake-up, not the I/O thread's two and the GIL passed between them."""
    topic = topic_name("driven")
    readers = collections.Counter()
    on_readable = Channel.on_readable

    def counted(channel):
        readers[threading.get_ident()] += 1
        on_readable(channel)

    with Producer(broker.bootstrap, acks=1, linger_ms=0, max_in_flight=1, max_batch_records=1) as producer:
        producer.send(topic, b"warm", partition=0).get(10)
        Channel.on_readable = counted
        try:
            offsets = [producer.send(topic, b"r%d" % i, partition=0).get(10).offset for i in range(200)]
        finally:
            Channel.on_readable = on_readable
    assert offsets == list(range(1, 201))
    # The I/O thread looks at the sockets only if the waiting thread let DRIVE_WINDOW pass (a stalled host)
    assert readers[threading.get_ident()] >= 180, readers


def test_a_driven_get_gives_up_at_its_timeout_and_the_record_still_arrives(tmp_path):
    """A get() that drives returns at its timeout (ProducerTimeout) while the broker does not answer; the
    batch stays in flight and is acknowledged once the broker answers."""
    broker = EmbeddedBroker(tmp_path / "data", processors=1).start()
    try:
        with Producer(broker.bootstrap, acks=1, linger_ms=0, request_timeout_ms=30_000) as producer:
            producer.send("paused", b"warm", partition=0).get(10)
            broker.pause()
            try:
                future = producer.send("paused", b"held", partition=0)
                started = time.monotonic()
                with pytest.raises(ProducerTimeout):
                    future.get(0.3)
                took = time.monotonic() - started
            finally:
                broker.resume()
            assert 0.3 <= took < 5, took  # at its own timeout, not the request timeout's 30 s
            assert future.get(10).offset == 1
    finally:
        broker.stop()


def test_an_answer_with_an_error_message_is_read_by_the_codec():
    """The answer template reads the usual answer; anything else (a message) takes the codec, whose
    error reaches the batch with its code and message."""
    from mmlog.client.accumulator import PartitionQueue, RecordAccumulator
    from mmlog.protocol import RequestHeader, encode_response
    from mmlog.protocol.messages import produce

    producer = Producer("127.0.0.1:9", retries=0)
    try:
        sender = producer._sender
        channel = unconnected_channel()
        outcomes = []
        for error, message in ((0, None), (87, "record 3 is bad"), (0, "")):
            batch = RecordAccumulator.built_batch(PartitionQueue("t", 2), memoryview(b"b"), 1, time.monotonic())
            batch.queue.inflight.append(batch)
            frame = encode_response(RequestHeader(0, 8, 1, None), produce.RESPONSE(responses=[
                {"name": "t", "partition_responses": [{"index": 2, "error_code": error, "base_offset": 41,
                                                       "error_message": message}]}]))
            with producer._io_lock:
                sender._on_response(channel, [batch], memoryview(frame)[4:], None)
            outcomes.append((batch.base_offset, batch.error))
        assert outcomes[0] == (41, None) and outcomes[2] == (41, None)
        assert outcomes[1][0] == -1 and outcomes[1][1].code == 87 and "record 3 is bad" in str(outcomes[1][1])
    finally:
        producer.close(timeout=0)


def test_a_batch_the_broker_rejects_fails_its_futures(broker):
    # the broker's max.message.bytes (1 MiB) is below this producer's batch size
    topic = topic_name("toolarge")
    with Producer(broker.bootstrap, batch_size=4 << 20, max_request_size=8 << 20) as producer:
        future = producer.send(topic, b"x" * (2 << 20), partition=0)
        with pytest.raises(MessageTooLarge):
            future.get(30)
        assert isinstance(future.exception(0), KafkaError)
        assert producer.send(topic, b"small", partition=0).get(30).offset == 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_broker_fails_fast_and_clearly():
    """send() raises the connection's error (not a ProducerTimeout after max.block.ms: it did not wait)."""
    with Producer(f"127.0.0.1:{free_port()}", request_timeout_ms=1000) as producer:
        with pytest.raises(ConnectionClosed, match="no broker reachable") as info:
            producer.send("t", b"v")
        assert isinstance(info.value, KafkaError) and info.value.retriable
        producer.flush(1)  # nothing queued: returns at once


def test_close_with_a_timeout_fails_what_it_could_not_send(broker):
    topic = topic_name("close")
    producer = Producer(broker.bootstrap, linger_ms=60_000, delivery_timeout_ms=60_000)
    producer.send(topic, b"warm", partition=0)
    producer.flush(30)
    with producer._io_lock:  # hold the I/O lock: nothing can be sent
        future = producer.send(topic, b"stuck", partition=0)
        with pytest.raises(ProducerTimeout):
            producer.flush(0.2)
        closer = threading.Thread(target=producer.close, args=(0.2,))
        closer.start()
        wait_for(lambda: producer._abort, what="close()'s flush to give up")
    closer.join(10)
    assert not closer.is_alive()
    assert isinstance(future.exception(5), KafkaError)
    with pytest.raises(KafkaError):
        producer.send(topic, b"after close")


def test_a_producer_lives_through_a_broker_restart(tmp_path):
    """Acknowledged before, during and after a crash: all there. Retried in-flight batches may
    duplicate records, but within a partition first appearances keep the send order."""
    broker = EmbeddedBroker(tmp_path / "data", processors=2, config={"num.partitions": 3}).start()
    try:
        topic = "restart"
        acked = []
        failed = []
        sent = [0]
        stop = threading.Event()

        def record(md, exc, i):
            (failed if exc is not None else acked).append((i, md, exc))

        with Producer(broker.bootstrap, linger_ms=2, batch_size=4096, retries=50, retry_backoff_ms=50,
                      request_timeout_ms=5000, delivery_timeout_ms=60_000) as producer:
            def sending():
                i = 0
                while not stop.is_set():
                    producer.send(topic, b"%08d" % i, key=b"k%d" % (i % 7),
                                  callback=lambda md, exc, i=i: record(md, exc, i))
                    i += 1
                    sent[0] = i
                    if i % 200 == 0:
                        time.sleep(0.01)

            thread = threading.Thread(target=sending)
            thread.start()
            wait_for(lambda: len(acked) >= 2000, what="2000 acknowledged", show=lambda: len(acked))
            broker.kill()  # a crash, with requests in flight
            time.sleep(0.3)
            broker.start()  # same port, same data directory
            acked_at_restart = len(acked)
            wait_for(lambda: len(acked) >= acked_at_restart + 2000, what="2000 more acknowledged after the restart",
                     show=lambda: len(acked))
            stop.set()
            thread.join(10)
            producer.flush(60)
        assert not failed, failed[:3]
        assert len(acked) == sent[0]
        stored = {}
        for p in range(3):
            values = [int(r.value) for r in fetch_all(broker.bootstrap, topic, p)]
            first_seen = list(dict.fromkeys(values))
            assert first_seen == sorted(first_seen), f"partition {p} reordered"
            stored.update(dict.fromkeys(values, p))
        assert set(stored) == set(range(sent[0]))  # everything acknowledged is there
        assert all(stored[i] == md.partition for i, md, _ in acked)
    finally:
        broker.stop()


def test_a_broker_that_stays_away_fails_records_after_the_delivery_timeout(tmp_path):
    broker = EmbeddedBroker(tmp_path / "data", processors=1).start()
    try:
        with Producer(broker.bootstrap, linger_ms=1, delivery_timeout_ms=1500, retry_backoff_ms=50,
                      request_timeout_ms=1000) as producer:
            assert producer.send("gone", b"before", partition=0).get(30).offset == 0
            broker.stop()
            future = producer.send("gone", b"after", partition=0)  # metadata is cached: queued
            with pytest.raises(KafkaError) as info:
                future.get(30)
            assert isinstance(info.value, ProducerTimeout) and "delivery timeout" in str(info.value)
    finally:
        broker.stop()
