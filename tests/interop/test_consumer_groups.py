"""Consumer groups with unmodified clients: confluent-kafka subscribe(), kafka-python group consumers, kcat -G.

The broker runs with Kafka's group timers scaled down (a 200 ms initial
rebalance delay) and the clients heartbeat every few hundred milliseconds, so a
rebalance settles in well under a second.
"""

import subprocess
import threading
from collections import Counter

import pytest

from mmlog.client.connection import BrokerConnection
from mmlog.protocol.messages import describe_groups, offset_fetch
from mmlog.testing import EmbeddedBroker
from tests.interop.conftest import require
from mmlog.testing.wait import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST_GROUPS = {"group.initial.rebalance.delay.ms": 200, "group.min.session.timeout.ms": 1000}
CK_GROUP_CONFIG = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 250, "auto.offset.reset": "earliest"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("groups"), processors=2, config=FAST_GROUPS) as b:
        yield b


def create(broker, topic, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(broker, topic, partitions, per_partition, tag):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def raw_committed(broker, group):
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        r = conn.request(offset_fetch.API_KEY, 5, group_id=group, topics=None)
        return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def raw_describe(broker, group):
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        return conn.request(describe_groups.API_KEY, 4, groups=[group]).groups[0]


class GroupConsumer(threading.Thread):
    """A confluent-kafka subscribe() consumer on its own thread (a librdkafka handle is used from one
    thread only), committing each record synchronously after processing it."""

    def __init__(self, broker, group, topic, consumed, lock, **config):
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                     **CK_GROUP_CONFIG, **config}
        self.topic, self.consumed, self.lock = topic, consumed, lock
        self.assignment: list[int] = []
        self.rebalances = 0
        self.errors: list = []
        self.leave = threading.Event()
        self.final_committed = None

    def run(self):
        consumer = Consumer(self.conf)
        consumer.subscribe([self.topic], on_assign=self._assigned)
        try:
            while not self.leave.is_set():
                msg = consumer.poll(0.1)
                self.assignment = sorted(tp.partition for tp in consumer.assignment())
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(msg.error())
                    continue
                with self.lock:
                    self.consumed.append((msg.partition(), msg.offset(), msg.value()))
                consumer.commit(message=msg, asynchronous=False)
            self.final_committed = {tp.partition: tp.offset for tp in consumer.committed(
                [TopicPartition(self.topic, p) for p in range(6)], timeout=10)}
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            consumer.close()

    def _assigned(self, consumer, partitions):
        self.rebalances += 1


def test_three_confluent_consumers_share_six_partitions_and_take_over_when_one_leaves(broker):
    topic, group = "ck-group-six", "ck-group"
    create(broker, topic, 6)
    consumed, lock = [], threading.Lock()
    consumers = [GroupConsumer(broker, group, topic, consumed, lock) for _ in range(3)]
    for c in consumers:
        c.start()
    wait_for(lambda: sorted(len(c.assignment) for c in consumers) == [2, 2, 2], what="two partitions each")
    assert sorted(p for c in consumers for p in c.assignment) == list(range(6))
    d = raw_describe(broker, group)
    assert (d.group_state, d.protocol_type, len(d.members)) == ("Stable", "consumer", 3)

    produce(broker, topic, 6, 50, "first")
    wait_for(lambda: len(consumed) >= 300, what="the first 300 records")

    leaving = consumers.pop()
    leaving.leave.set()
    leaving.join(30)
    wait_for(lambda: sorted(len(c.assignment) for c in consumers) == [3, 3], what="three partitions each")
    assert sorted(p for c in consumers for p in c.assignment) == list(range(6))

    produce(broker, topic, 6, 50, "second")
    wait_for(lambda: len(consumed) >= 600, what="all 600 records")
    # A last record on each partition, once all six are read, proves that anything the 600 could have
    # brought twice (a replay after the hand-over) has arrived: a partition is read in order.
    produce(broker, topic, 6, 1, "last")
    wait_for(lambda: sum(v.startswith(b"last-") for _, _, v in consumed) == 6, what="the six last records")
    for c in consumers:
        c.leave.set()
    for c in consumers:
        c.join(30)
    assert not any(c.is_alive() for c in consumers + [leaving])
    assert not [e for c in consumers + [leaving] for e in c.errors]
    consumed = [r for r in consumed if not r[2].startswith(b"last-")]

    # Each record exactly once: commits were clean, so no partition handed over replays anything.
    by_position = Counter((p, o) for p, o, _ in consumed)
    by_value = Counter(v for _, _, v in consumed)
    assert len(consumed) == 600 and len(by_position) == 600, (  # what went wrong, if it ever does
        f"{len(consumed)} records, {len(by_position)} positions, {len(by_value)} values; "
        f"repeated positions {sorted(k for k, n in by_position.items() if n > 1)[:8]}; "
        f"repeated values {sorted(k for k, n in by_value.items() if n > 1)[:8]}; "
        f"rebalances seen {[c.rebalances for c in consumers + [leaving]]}\n"
        + "\n".join(line for line in broker.log_lines if "coordinator" in line or "level=WARN" in line))
    assert Counter(p for p, _, _ in consumed) == {p: 100 for p in range(6)}
    assert raw_committed(broker, group) == {(topic, p): 101 for p in range(6)}  # the last records' too
    for c in consumers:  # consumer.committed() reads the same through OffsetFetch
        assert c.final_committed == {p: 101 for p in range(6)}
    assert raw_describe(broker, group).group_state == "Empty"


def test_a_static_confluent_consumer_restarts_into_its_old_membership_without_a_rebalance(broker):
    topic, group = "ck-static", "ck-static-group"
    create(broker, topic, 4)
    consumed, lock = [], threading.Lock()
    static = GroupConsumer(broker, group, topic, consumed, lock, **{"group.instance.id": "static-1"})
    other = GroupConsumer(broker, group, topic, consumed, lock)
    static.start()
    other.start()
    wait_for(lambda: sorted(len(c.assignment) for c in (static, other)) == [2, 2], what="two partitions each")
    members = {m.group_instance_id: m.member_id for m in raw_describe(broker, group).members}
    rebalances = other.rebalances
    before = static.assignment

    static.leave.set()  # a static member closes without LeaveGroup (KIP-345)
    static.join(30)
    assert len(raw_describe(broker, group).members) == 2  # still a member until its session expires
    again = GroupConsumer(broker, group, topic, consumed, lock, **{"group.instance.id": "static-1"})
    again.start()
    wait_for(lambda: again.assignment == before, what="the old assignment back")
    assert {m.group_instance_id: m.member_id for m in raw_describe(broker, group).members} == members
    assert other.rebalances == rebalances  # the other member never saw a rebalance
    for c in (again, other):
        c.leave.set()
    for c in (again, other):
        c.join(30)
    assert not again.errors and not other.errors


def test_a_confluent_assign_consumer_commits_with_generation_minus_one(broker):
    topic = "ck-assign-commit"
    create(broker, topic, 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-assign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    consumer.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)], asynchronous=False)
    got = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    consumer.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 7), (1, 9)]
    assert raw_committed(broker, "ck-assign") == {(topic, 0): 7, (topic, 1): 9}


def test_kafka_python_consumes_as_a_group_commits_and_resumes_from_the_commit(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition as KTopicPartition

    topic, group = "kp-group-topic", "kp-group"
    create(broker, topic, 3)
    produce(broker, topic, 3, 20, "kp")

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000,
                             session_timeout_ms=6000, heartbeat_interval_ms=300)

    first = consumer()
    got = []
    for msg in first:
        got.append((msg.partition, msg.offset))
        if len(got) == 60:
            break
    first.commit()
    assert sorted(got) == [(p, o) for p in range(3) for o in range(20)]
    assert {p: first.committed(KTopicPartition(topic, p)) for p in range(3)} == {0: 20, 1: 20, 2: 20}

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    listed = admin.list_groups()  # ListGroups v4 answers the state too
    assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable"} in listed
    description = admin.describe_groups([group])[group]
    assert (description["group_state"], description["protocol_data"]) == ("Stable", "range")
    [member] = description["members"]  # kafka-python decodes the metadata and assignment we hand out
    assert member["member_metadata"]["topics"] == [topic]
    assert member["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1, 2]}]
    offsets = admin.list_group_offsets({group: None})[group]
    assert {tp.partition: meta.offset for tp, meta in offsets.items()} == {0: 20, 1: 20, 2: 20}
    admin.close()
    first.close()

    produce(broker, topic, 3, 5, "more")
    second = consumer()
    rest = sorted((m.partition, m.offset) for m in second)  # stops after 3 s without records
    second.close()
    assert rest == [(p, o) for p in range(3) for o in range(20, 25)]


def test_kcat_consumes_as_a_balanced_group_and_commits(broker):
    kcat = require("kcat")
    topic, group = "kcat-group-topic", "kcat-group"
    create(broker, topic, 2)
    produce(broker, topic, 2, 15, "kcat")
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-G", group, topic, "-c", "30", "-f", "%p:%o:%s\\n",
                          "-X", "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=250"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sorted(lines) == sorted(f"{p}:{i}:kcat-{p}-{i}" for p in range(2) for i in range(15))
    wait_for(lambda: raw_committed(broker, group) == {(topic, 0): 15, (topic, 1): 15}, timeout=10,
             what="kcat's commits")
