"""Client quotas on a real broker with real clients: AlterClientQuotas / DescribeClientQuotas, and byte-rate
quotas enforced across processors with throttle_time_ms and a muted channel, as Kafka does.

The broker here samples rates over 2 windows of 1 s instead of Kafka's 11. What a test asserts is the
quota's accounting, never a speed: a quota'd client moves no more bytes than the quota allows over the time
it ran plus one first burst (a slower machine moves fewer, and still passes), and it is told a throttle
time while a client without a quota is not. How close to its quota a client runs is
tools/bench_quotas.py's to measure.
"""

import json
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer

from mmlog.client.admin import Admin
from mmlog.client.connection import BrokerConnection
from mmlog.client.consumer import Consumer as MmlogConsumer
from mmlog.client.producer import Producer as MmlogProducer
from mmlog.client.records import TopicPartition
from mmlog.errors import InvalidRequest
from mmlog.protocol.messages import metadata
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, processors_caught_up
from mmlog.testing.wait import wait_for

QUOTA = 1_000_000  # bytes a second
# A client new to its quota may take what W-1 windows allow at once, and the window it starts in is padded
# to W-1 whole windows (Kafka's Rate): with W = 2 that is up to 2 MB in its first second whatever the quota.
BURST = 2 * QUOTA
ENOUGH = 4 * QUOTA  # bytes a quota'd client moves in a test: two bursts' worth, past where the quota bites
VALUE = b"x" * 10_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = {"quota.window.num": 2, "group.initial.rebalance.delay.ms": 0, **METRICS_ON}
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config=config) as b:
        yield b


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap) as a:
        yield a


def _producer(broker, client_id, throttles):
    def stats(text):
        for b in json.loads(text)["brokers"].values():
            if b["nodeid"] >= 0:
                throttles.append(b["throttle"]["max"])

    return Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                     "batch.size": 65536, "statistics.interval.ms": 500, "stats_cb": stats, "log_level": 0})


def within_quota(moved: int, seconds: float) -> bool:
    """What a quota of QUOTA allows over `seconds` (with 10% for the windows' edges), plus the first burst."""
    return moved <= 1.1 * QUOTA * seconds + BURST


def _consume(poll, started: float, enough=ENOUGH) -> tuple[int, float]:
    """(bytes, seconds) of a quota'd consumer subscribed at `started` once it has `enough` bytes; poll()
    returns the bytes of one poll."""
    moved = [0]

    def more():
        moved[0] += poll()
        return moved[0] >= enough

    wait_for(more, timeout=120, what=f"{enough} bytes consumed", interval=0, show=lambda: moved[0])
    return moved[0], time.monotonic() - started


def test_quotas_are_set_described_and_removed_with_validate_only_honoured(admin):
    slow = (("client-id", "q-set"),)
    admin.alter_client_quotas({slow: {"producer_byte_rate": 2048}}, validate_only=True)
    assert slow not in admin.describe_client_quotas()
    admin.alter_client_quotas({slow: {"producer_byte_rate": 2048, "request_percentage": 12.5},
                               (("user", None), ("client-id", None)): {"consumer_byte_rate": 4096}})
    quotas = admin.describe_client_quotas()
    assert quotas[slow] == {"producer_byte_rate": 2048, "request_percentage": 12.5}
    assert quotas[(("user", None), ("client-id", None))] == {"consumer_byte_rate": 4096}
    assert admin.describe_client_quotas([("user", 1, None)], strict=True) == {}
    assert list(admin.describe_client_quotas([("client-id", 0, "q-set")], strict=True)) == [slow]
    admin.alter_client_quotas({slow: {"producer_byte_rate": None, "request_percentage": None},
                               (("user", None), ("client-id", None)): {"consumer_byte_rate": None}})
    assert admin.describe_client_quotas() == {}


@pytest.mark.parametrize("entity, ops, message", [
    ((("client-id", "x"),), {"bytes_per_year": 1}, "Invalid configuration key bytes_per_year"),
    ((("client-id", "x"),), {"producer_byte_rate": 1.5}, "Configuration producer_byte_rate must be a LONG value"),
    ((("ip", "1.2.3.4"),), {"producer_byte_rate": 1}, "Unhandled client quota entity type: ip"),
    ((("client-id", ""),), {"producer_byte_rate": 1}, "Empty client-id not supported"),
    ((), {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
])
def test_a_bad_quota_entry_is_invalid_request_and_stores_nothing_while_a_good_one_beside_it_is_stored(
        admin, entity, ops, message):
    """Entries are answered one by one, as Kafka's AlterClientQuotas answers each entity."""
    good = (("client-id", "good"),)
    with pytest.raises(InvalidRequest, match=message):
        admin.alter_client_quotas({entity: ops, good: {"producer_byte_rate": 10}})
    assert admin.describe_client_quotas() == {good: {"producer_byte_rate": 10}}
    admin.alter_client_quotas({good: {"producer_byte_rate": None}})


def test_a_produce_quota_holds_one_client_to_its_rate_and_throttles_it_while_another_runs_free(broker, admin):
    """Two librdkafka producers at once, one loop feeding both: the quota'd one's acknowledged bytes stay
    within what its quota allows over the time it ran, and only it is told a throttle time."""
    admin.create_topic("quota-produce", 2)
    admin.alter_client_quotas({(("client-id", "slow-producer"),): {"producer_byte_rate": QUOTA}})
    processors_caught_up(broker)
    slow_throttles, free_throttles = [], []
    slow, free = _producer(broker, "slow-producer", slow_throttles), _producer(broker, "free-producer", free_throttles)
    acked = {"slow": 0, "free": 0}

    def counter(name):
        def done(err, msg):
            if err is None:
                acked[name] += len(msg.value())
        return done

    def feed():
        for name, p in (("slow", slow), ("free", free)):
            try:
                p.produce("quota-produce", VALUE, partition=0 if name == "slow" else 1, callback=counter(name))
            except BufferError:
                pass
            p.poll(0)
        return acked["slow"] >= ENOUGH and slow_throttles and max(slow_throttles) > 0

    started = time.monotonic()
    wait_for(feed, timeout=120, what=f"{ENOUGH} bytes acknowledged to the quota'd producer, and a throttle time",
             interval=0, show=lambda: (acked, max(slow_throttles, default=None)))
    seconds = time.monotonic() - started
    moved = dict(acked)
    for p in (slow, free):
        p.purge()  # what is still queued is not counted: no waiting for it at 1 MB/s
        p.flush(10)
    print(f"in {seconds:.1f} s: quota'd {moved['slow']} B, free {moved['free']} B, "
          f"throttle_time_ms max {max(slow_throttles)}")
    assert within_quota(moved["slow"], seconds), (moved, seconds)
    assert max(free_throttles, default=0) == 0


def test_a_consumer_quota_holds_a_consumer_to_its_rate(broker, admin):
    admin.create_topic("quota-fetch", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 65536})
    for _ in range(1200):
        producer.produce("quota-fetch", VALUE)
        producer.poll(0)
    producer.flush(30)
    admin.alter_client_quotas({(("client-id", "slow-consumer"),): {"consumer_byte_rate": QUOTA}})
    processors_caught_up(broker)
    throttles = []

    def stats(text):
        throttles.extend(b["throttle"]["max"] for b in json.loads(text)["brokers"].values() if b["nodeid"] >= 0)

    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-consumer", "group.id": "qc",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
                         "max.partition.fetch.bytes": 65536,  # a batch a fetch (the producer's batch.size)
                         "statistics.interval.ms": 500, "stats_cb": stats})
    consumer.subscribe(["quota-fetch"])

    def poll():
        msg = consumer.poll(0.1)
        return len(msg.value()) if msg is not None and not msg.error() else 0

    try:
        moved, seconds = _consume(poll, started)
        wait_for(lambda: poll() is not None and throttles and max(throttles) > 0, what="a throttle time reported",
                 interval=0)
    finally:
        consumer.close()
    # The quota counts the bytes the broker sends (the partial batch that ends a fetch included): the values
    # delivered are fewer.
    assert within_quota(moved, seconds), (moved, seconds)


def test_mmlogs_producer_is_held_to_its_quota_and_reports_the_throttle_time(broker, admin):
    admin.create_topic("quota-mmlog", 1)
    admin.alter_client_quotas({(("client-id", "mmlog-slow"),): {"producer_byte_rate": QUOTA}})
    processors_caught_up(broker)
    with MmlogProducer(broker.bootstrap, client_id="mmlog-slow", linger_ms=5, batch_size=65536) as producer:
        producer.send("quota-mmlog", VALUE).result(60)  # the first send compiles the producer's kernels
        started, sent = time.monotonic(), [len(VALUE)]

        def send():
            future = producer.send("quota-mmlog", VALUE)
            sent[0] += len(VALUE)
            if sent[0] % (50 * len(VALUE)) == 0:
                future.result(30)  # paced by the acknowledgements, so the count is what the broker took
            return sent[0] >= ENOUGH

        wait_for(send, timeout=120, what=f"{ENOUGH} bytes sent", interval=0, show=lambda: sent[0])
        producer.flush()
        seconds = time.monotonic() - started
        assert within_quota(sent[0], seconds), (sent[0], seconds)
        assert producer.metrics()["throttle_time_ms_max"] > 0


def test_a_request_quota_throttles_a_busy_client_and_mutes_its_connection(broker, admin):
    admin.alter_client_quotas({(("client-id", "busy"),): {"request_percentage": 1}})
    processors_caught_up(broker)
    conn = BrokerConnection("127.0.0.1", broker.port, client_id="busy", timeout=10)
    try:
        throttled = None
        for _ in range(5000):
            body = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[], allow_auto_topic_creation=False))
            if body.throttle_time_ms:
                throttled = body.throttle_time_ms
                break
        assert throttled is not None and 0 < throttled <= 1000  # request time: at most one window
        start = time.monotonic()
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[], allow_auto_topic_creation=False))
        assert time.monotonic() - start >= throttled / 1000 * 0.9  # not read until the throttle time passed
    finally:
        conn.close()
        admin.alter_client_quotas({(("client-id", "busy"),): {"request_percentage": None}})


def _recv_exact(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def test_kafka_pythons_codec_alters_and_describes_quotas(broker, admin):
    """kafka-python 3 has the two APIs' codecs (from Kafka's JSON schemas) but no AdminClient methods for them:
    its bytes go to the broker as they are, and its decoder reads the answers."""
    from kafka.protocol.admin import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                      DescribeClientQuotasRequest, DescribeClientQuotasResponse)

    def call(request, response_class):
        request.with_header(correlation_id=7, client_id="kafka-python")
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(request.encode(version=0, header=True, framed=True))
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            return response_class.decode(_recv_exact(sock, size), version=0, header=True)

    entry = AlterClientQuotasRequest.EntryData
    answer = call(AlterClientQuotasRequest(validate_only=False, entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name="kp")],
        ops=[entry.OpData(key="consumer_byte_rate", value=5000.0, remove=False),
             entry.OpData(key="no_such_rate", value=1.0, remove=False)])]), AlterClientQuotasResponse)
    assert [(e.error_code, e.error_message) for e in answer.entries] == [(42, "Invalid configuration key no_such_rate")]
    call(AlterClientQuotasRequest(validate_only=False, entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name="kp")],
        ops=[entry.OpData(key="consumer_byte_rate", value=5000.0, remove=False)])]), AlterClientQuotasResponse)
    component = DescribeClientQuotasRequest.ComponentData
    answer = call(DescribeClientQuotasRequest(strict=True, components=[
        component(entity_type="client-id", match_type=0, match="kp")]), DescribeClientQuotasResponse)
    assert answer.error_code == 0
    assert [([(d.entity_type, d.entity_name) for d in e.entity], [(v.key, v.value) for v in e.values])
            for e in answer.entries] == [([("client-id", "kp")], [("consumer_byte_rate", 5000.0)])]
    admin.alter_client_quotas({(("client-id", "kp"),): {"consumer_byte_rate": None}})


def test_mmlogs_consumer_is_held_to_its_quota_and_reports_the_throttle_time(broker, admin):
    admin.create_topic("quota-mmlog-fetch", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 65536})
    for _ in range(1200):
        producer.produce("quota-mmlog-fetch", VALUE)
        producer.poll(0)
    producer.flush(30)
    admin.alter_client_quotas({(("client-id", "mmlog-slow-consumer"),): {"consumer_byte_rate": QUOTA}})
    processors_caught_up(broker)
    started = time.monotonic()
    consumer = MmlogConsumer(broker.bootstrap, client_id="mmlog-slow-consumer", auto_offset_reset="earliest",
                             max_partition_fetch_bytes=65536)
    try:
        consumer.assign([TopicPartition("quota-mmlog-fetch", 0)])
        moved, seconds = _consume(lambda: sum(len(r.value) for r in consumer.poll(0.1)), started)
        assert within_quota(moved, seconds), (moved, seconds)  # as librdkafka's (the test above)
        assert consumer.metrics()["throttle_time_ms_max"] > 0
    finally:
        consumer.close()
