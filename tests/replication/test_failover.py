"""Leaders die, hang and come back under a steady acks=all load: nothing acknowledged is lost.

Three real brokers on a real ZooKeeper, a topic with replication factor 3 and
min.insync.replicas 2, and librdkafka (confluent-kafka) producing unique values
with acks=all. Brokers are SIGKILLed (their whole process group), SIGSTOPped past
the lag time and the session timeout, and restarted. At the end every value the
producer saw acknowledged is read back at exactly its acknowledged offset, and
the replicas' segment files are byte-identical.
"""

from __future__ import annotations

import subprocess
import threading
import time

import confluent_kafka
import pytest

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.producer import Producer
from mmlog.errors import NotEnoughReplicas
from mmlog.protocol.messages import metadata
from mmlog.testing.cluster import check_replicas_identical, full_isr, leader_of, partition_state, zk_state
from mmlog.testing.connections import connect
from mmlog.testing.scrape import scrape
from mmlog.testing.wait import wait_for

TOPIC = "failover"


class SteadyProducer(threading.Thread):
    """librdkafka with acks=all sending unique values at a steady rate; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int = 1000, idempotent: bool = False) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": idempotent,
            "message.timeout.ms": 120_000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000})
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.errors: list = []
        self.sent = 0
        self._halt = threading.Event()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            self.errors.append(err)

    def run(self) -> None:
        while not self._halt.is_set():
            for _ in range(self.rate // 100):
                value = b"v%08d" % self.sent
                self.producer.produce(self.topic, value, partition=self.sent % self.partitions,
                                      on_delivery=self._delivered)
                self.sent += 1
            self.producer.poll(0.01)
        assert self.producer.flush(120) == 0

    def stop(self) -> None:
        self._halt.set()
        self.join(150)


def leave_leader_alone(brokers, topic: str):
    """Create a one-partition RF 3 topic, kill both followers, wait for the ISR to shrink; (leader, the dead)."""
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, 1, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(brokers, topic, 1)
    leader = leader_of(brokers, topic)
    others = [b for b in brokers if b is not leader]
    for b in others:
        b.kill()
    wait_for(lambda: partition_state(leader.bootstrap, topic)[2] == (leader.broker_id,), timeout=30,
             what="the ISR shrunk to the leader")
    return leader, others


def kill_leaders_under_load(brokers, topic: str, partitions: int, producer: "SteadyProducer", times: int) -> None:
    """SIGKILL the leader of partition 0 `times` times, restarting it each time, while the producer runs."""
    for _ in range(times):
        victim = leader_of(brokers, topic, 0)
        victim.kill()
        time.sleep(1.5)
        victim.start()
        full_isr(brokers, topic, partitions)
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 300, what="acks after the restart")


def read_all(bootstrap: str, topic: str, partitions: int, until: dict[int, int]) -> dict[int, list[bytes]]:
    """Every record of each partition from offset 0 to `until[p]` (exclusive), by offset."""
    got: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        wait_for(lambda: [got[r.partition].__setitem__(r.offset, r.value) for r in consumer.poll(0.5)] is not None
                 and all(len(got[p]) >= until[p] for p in range(partitions)), timeout=60, what="every record")
    return got


def test_killed_and_hung_leaders_lose_no_acknowledged_record(replicated):
    partitions = 3
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic(TOPIC, partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(replicated, TOPIC, partitions)
    producer = SteadyProducer(",".join(b.bootstrap for b in replicated), TOPIC, partitions)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 500, what="a first acknowledged load")
        kill_leaders_under_load(replicated, TOPIC, partitions, producer, times=3)
        hung = leader_of(replicated, TOPIC, 1)
        hung.pause()
        # past replica.lag.time.max.ms and the ZooKeeper session: another broker leads, the hung one left the ISR
        alive = next(b for b in replicated if b is not hung)
        wait_for(lambda: (s := partition_state(alive.bootstrap, TOPIC, 1))[0] not in (hung.broker_id, -1)
                 and hung.broker_id not in s[2], timeout=30, what="a new leader, and the hung broker out of the ISR")
        hung.resume()
        full_isr(replicated, TOPIC, partitions)
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 300, what="acks after the hung broker returned")
    finally:
        producer.stop()
    assert not producer.errors
    ends = {p: max(o for q, o in producer.acked.values() if q == p) + 1 for p in range(partitions)}
    got = read_all(replicated[0].bootstrap, TOPIC, partitions, ends)
    lost = [(v, p, o) for v, (p, o) in producer.acked.items() if got[p].get(o) != v]
    assert not lost, f"{len(lost)} of {len(producer.acked)} acknowledged records not at their offsets: {lost[:5]}"
    check_replicas_identical(replicated, TOPIC, partitions)


def test_min_insync_replicas_refuses_acks_all_until_the_isr_refills(replicated):
    leader, others = leave_leader_alone(replicated, "min-isr")
    with Producer(leader.bootstrap, acks="all", retries=0) as producer:
        with pytest.raises(NotEnoughReplicas):
            producer.send("min-isr", b"refused", partition=0).result(20)
    with Producer(leader.bootstrap, acks=1) as producer:
        assert producer.send("min-isr", b"taken", partition=0).result(20).offset == 0
    for b in others:
        b.start()
    full_isr(replicated, "min-isr", 1)
    with Producer(leader.bootstrap, acks="all") as producer:
        assert producer.send("min-isr", b"replicated", partition=0).result(20).offset == 1
    check_replicas_identical(replicated, "min-isr", 1)


def test_a_deposed_leader_truncates_what_its_followers_never_fetched(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("diverge", 1, replication_factor=3)
    full_isr(replicated, "diverge", 1)
    with Producer(replicated[0].bootstrap, acks="all") as producer:
        for i in range(10):
            producer.send("diverge", b"both-%d" % i, partition=0)
        producer.flush(20)
    old = leader_of(replicated, "diverge")
    followers = [b for b in replicated if b is not old]
    for b in followers:
        b.pause()  # they fetch nothing from here on
    try:
        # Their fetches parked at the leader expire empty (replica.fetch.wait.max.ms): none is left to carry
        # what comes next to a follower.
        wait_for(lambda: scrape(old).get("kafka_server_delayedoperationpurgatory_purgatorysize") == 0,
                 what="the followers' parked fetches to expire")
        with Producer(old.bootstrap, acks=1) as producer:
            for i in range(5):
                producer.send("diverge", b"lost-%d" % i, partition=0).result(10)
        old.kill()  # appended, acknowledged with acks=1, never replicated
    finally:
        for b in followers:
            b.resume()
    new = leader_of(followers, "diverge")
    with Producer(new.bootstrap, acks="all") as producer:
        for i in range(7):
            producer.send("diverge", b"new-%d" % i, partition=0).result(30)
    old.start()
    full_isr(replicated, "diverge", 1)
    check_replicas_identical(replicated, "diverge", 1)
    got = read_all(old.bootstrap, "diverge", 1, {0: 17})[0]
    assert [got[o] for o in range(17)] == [b"both-%d" % i for i in range(10)] + [b"new-%d" % i for i in range(7)]


def test_with_unclean_election_off_a_dead_isr_keeps_the_partition_offline_until_it_returns(replicated, zk):
    leader, others = leave_leader_alone(replicated, "offline")
    with Producer(leader.bootstrap, acks=1) as producer:  # min ISR 2 refuses acks=all: the leader alone holds it
        assert producer.send("offline", b"only-on-the-leader", partition=0).result(20).offset == 0
    leader.kill()
    others[0].start()  # registered when start() returns: the controller hears of it before the leader's death
    # The controller has seen the leader go, after others[0] came: it wrote the partition leaderless, with
    # the dead ISR kept, rather than electing the out-of-sync replica it had by then.
    state = wait_for(lambda: (s := zk_state(zk, "offline")).leader == -1 and s, what="the partition leaderless",
                     show=lambda: zk_state(zk, "offline"))
    assert state.isr == (leader.broker_id,)
    wait_for(lambda: partition_state(others[0].bootstrap, "offline")[0] == -1, what="Metadata to say so")
    assert zk_state(zk, "offline").leader == -1
    leader.start()
    assert leader_of([leader, others[0]], "offline") is leader
    got = read_all(leader.bootstrap, "offline", 1, {0: 1})[0]
    assert got[0] == b"only-on-the-leader"


def test_a_stopped_leader_hands_its_partitions_over_before_it_exits(replicated):
    partitions = 3
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("handover", partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(replicated, "handover", partitions)
    producer = SteadyProducer(",".join(b.bootstrap for b in replicated), "handover", partitions)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 300, what="a first acknowledged load")
        leaving = leader_of(replicated, "handover", 0)
        assert leaving.stop() == 0
        handed = [line for line in leaving.log_lines if "controlled shutdown" in line]
        assert handed and "0 partition" not in handed[0], handed
        rest = [b for b in replicated if b is not leaving]
        assert leader_of(rest, "handover", 0) is not leaving
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 300, what="acks from the new leaders")
        leaving.start()
        full_isr(replicated, "handover", partitions)
    finally:
        producer.stop()
    assert not producer.errors  # librdkafka retried what the handover refused; nothing failed
    ends = {p: max(o for q, o in producer.acked.values() if q == p) + 1 for p in range(partitions)}
    got = read_all(replicated[0].bootstrap, "handover", partitions, ends)
    assert all(got[p].get(o) == v for v, (p, o) in producer.acked.items())
    check_replicas_identical(replicated, "handover", partitions)


def test_kafka_python_produces_and_consumes_through_a_leader_change(replicated):
    kafka = pytest.importorskip("kafka")
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("kp", 1, replication_factor=3)
    full_isr(replicated, "kp", 1)
    bootstrap = [b.bootstrap for b in replicated]
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                                   api_version=(2, 5), metadata_max_age_ms=1000)
    try:
        acked = {producer.send("kp", b"kp-%d" % i).get(30).offset: b"kp-%d" % i for i in range(50)}
        leader_of(replicated, "kp").kill()
        acked.update({producer.send("kp", b"kp-%d" % i).get(60).offset: b"kp-%d" % i for i in range(50, 100)})
    finally:
        producer.close(5)
    live = [b for b in replicated if b.proc.poll() is None]
    consumer = kafka.KafkaConsumer(bootstrap_servers=[b.bootstrap for b in live], auto_offset_reset="earliest",
                                   api_version=(2, 5), consumer_timeout_ms=15000)
    try:
        consumer.assign([kafka.TopicPartition("kp", 0)])
        got = {}
        for msg in consumer:
            got[msg.offset] = msg.value
            if len(got) >= len(acked):
                break
    finally:
        consumer.close()
    assert all(got.get(o) == v for o, v in acked.items())


def leader_epoch_in_metadata(broker, topic: str) -> int:
    with connect(broker) as conn:
        body = conn.request(metadata.API_KEY, 9, metadata.REQUEST(topics=[{"name": topic}],
                                                                   allow_auto_topic_creation=False))
    return body.topics[0].partitions[0].leader_epoch


class LibrdkafkaReader:
    """A librdkafka consumer of partition 0 from its beginning; read() polls until it has `count` values."""

    def __init__(self, brokers, topic: str, isolation: str) -> None:
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": ",".join(b.bootstrap for b in brokers if b.proc.poll() is None),
            "group.id": f"reader-{isolation}", "isolation.level": isolation, "enable.auto.commit": False})
        self.consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        self.values: list[bytes] = []
        self.errors: list = []

    def read(self, count: int, timeout: float = 30) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while len(self.values) < count and time.monotonic() < deadline:
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error():
                self.errors.append(msg.error())
            elif msg is not None:
                self.values.append(msg.value())
        return self.values

    def close(self) -> None:
        self.consumer.close()


def test_librdkafka_consumers_read_on_through_a_leader_change(replicated):
    """Metadata names each partition's leader epoch, as Kafka's does: librdkafka fences its fetches with it.
    (Told -1, it sent 0, and every leader after the first answered FENCED_LEADER_EPOCH for ever.)"""
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("rk", 1, replication_factor=3)
    full_isr(replicated, "rk", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in replicated),
                                         "acks": "all", "linger.ms": 1})
    first = [b"rk-%d" % i for i in range(10)]
    for value in first:
        producer.produce("rk", value, partition=0)
    assert producer.flush(30) == 0
    running = LibrdkafkaReader(replicated, "rk", "read_uncommitted")
    try:
        assert running.read(10) == first
        old = leader_of(replicated, "rk")
        assert leader_epoch_in_metadata(old, "rk") == 0
        old.kill()
        new = leader_of(replicated, "rk")
        assert leader_epoch_in_metadata(new, "rk") == 1
        rest = [b"rk-%d" % i for i in range(10, 20)]
        for value in rest:
            producer.produce("rk", value, partition=0)
        assert producer.flush(30) == 0
        assert running.read(20) == first + rest, running.errors[:3]
    finally:
        running.close()
    for isolation in ("read_uncommitted", "read_committed"):
        fresh = LibrdkafkaReader(replicated, "rk", isolation)
        try:
            assert fresh.read(20) == first + rest, (isolation, fresh.errors[:3])
        finally:
            fresh.close()


def test_an_idempotent_producer_through_leader_changes_leaves_no_duplicate(replicated):
    """Producer state is copied with the batches: a new leader recognises a retry of a batch the old one took."""
    partitions = 2
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("exactly", partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(replicated, "exactly", partitions)
    producer = SteadyProducer(",".join(b.bootstrap for b in replicated), "exactly", partitions, idempotent=True)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 500, what="a first acknowledged load")
        kill_leaders_under_load(replicated, "exactly", partitions, producer, times=2)
    finally:
        producer.stop()
    assert not producer.errors
    ends = {p: max(o for q, o in producer.acked.values() if q == p) + 1 for p in range(partitions)}
    got = read_all(replicated[0].bootstrap, "exactly", partitions, ends)
    assert all(got[p].get(o) == v for v, (p, o) in producer.acked.items())
    stored = [v for p in range(partitions) for v in got[p].values()]
    assert len(stored) == len(set(stored)), "a record stored twice"


def test_kcat_lists_replicas_and_isr_and_produces_through_a_leader_change(replicated):
    from tests.interop.conftest import require

    kcat = require("kcat")
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("kcat-rf3", 1, replication_factor=3)
    full_isr(replicated, "kcat-rf3", 1)
    listing = subprocess.run([kcat, "-L", "-b", replicated[1].bootstrap, "-t", "kcat-rf3"], capture_output=True,
                             text=True, check=True, timeout=60).stdout
    line = next(x for x in listing.splitlines() if "partition 0" in x)  # partition 0, leader 1, replicas: 1,2,0, isrs: ...
    replicas = line.split("replicas: ")[1].split(",")
    isrs = line.split("isrs: ")[1].split(",")
    assert sorted(int(r.split()[0]) for r in replicas[:3]) == [0, 1, 2] and len(isrs) == 3, line
    brokers = ",".join(b.bootstrap for b in replicated)
    subprocess.run([kcat, "-P", "-b", brokers, "-t", "kcat-rf3", "-p", "0", "-X", "acks=all"],
                   input="".join(f"before-{i}\n" for i in range(100)), text=True, check=True, timeout=60)
    leader_of(replicated, "kcat-rf3").kill()
    subprocess.run([kcat, "-P", "-b", brokers, "-t", "kcat-rf3", "-p", "0", "-X", "acks=all",
                    "-X", "message.timeout.ms=60000"],
                   input="".join(f"after-{i}\n" for i in range(100)), text=True, check=True, timeout=90)
    live = ",".join(b.bootstrap for b in replicated if b.proc.poll() is None)
    out = subprocess.run([kcat, "-C", "-b", live, "-t", "kcat-rf3", "-p", "0", "-o", "beginning", "-e"],
                         capture_output=True, text=True, check=True, timeout=90).stdout.splitlines()
    assert out == [f"before-{i}" for i in range(100)] + [f"after-{i}" for i in range(100)]


def test_acks_all_answers_request_timed_out_when_followers_do_not_fetch_within_timeout_ms(replicated):
    from mmlog.protocol.messages import produce
    from mmlog.protocol.records import build_batch
    from mmlog.testing.connections import connect
    from tests.processors.test_bad_input import produce_one

    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("slow-isr", 1, replication_factor=3)
    full_isr(replicated, "slow-isr", 1)
    leader = leader_of(replicated, "slow-isr")
    followers = [b for b in replicated if b is not leader]
    with connect(leader) as conn:  # Metadata may name the leader before it has the topic: clients retry
        wait_for(lambda: produce_one(conn, "slow-isr", 0, build_batch([(None, b"first")])).error_code == 0,
                 what="the leader taking a record")
    for b in followers:
        b.pause()  # hung, but still in the ISR for replica.lag.time.max.ms
    try:
        with connect(leader) as conn:
            body = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=-1, timeout_ms=300, topic_data=[
                {"name": "slow-isr", "partition_data": [{"index": 0, "records": build_batch([(None, b"x")])}]}]))
    finally:
        for b in followers:
            b.resume()
    answer = body.responses[0].partition_responses[0]
    # REQUEST_TIMED_OUT: the request's timeout_ms (300) ran out; had the followers left the ISR first
    # (replica.lag.time.max.ms, 2,000), the answer would have been another.
    assert answer.error_code == 7, answer
    full_isr(replicated, "slow-isr", 1)
    check_replicas_identical(replicated, "slow-isr", 1)  # appended all the same: the followers copy it
