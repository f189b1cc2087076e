"""A storm of admin and group requests on colliding names, while processors are killed, leaves a broker
that serves: no loop dies of it, every request is answered or fails as the client is told, and afterwards a
new client creates a topic, produces, joins a group and consumes.

Eight kafka-python admin clients create, delete and grow the same four topics, delete their records and
describe, list and delete groups, while a confluent-kafka consumer keeps joining a group on one of those
topics, and a processor is SIGKILLed every few seconds. A CreateTopics answered after another client had
deleted its topic used to kill the processor answering it, whose death then killed the main process's
control thread: a zombie broker, up and serving nothing that needs the control plane."""

import os
import random
import re
import signal
import threading
import time

import pytest

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402
from kafka.admin import NewPartitions, NewTopic  # noqa: E402
from kafka.errors import KafkaError  # noqa: E402

from mmlog.testing import EmbeddedBroker  # noqa: E402
from mmlog.testing.wait import wait_for

NAMES = [f"storm-{c}" for c in "abcd"]
GROUPS = ["storm-g1", "storm-g2"]
STORM_S = 15.0
KILL_EVERY_S = 4.0
CLIENTS = 8
CONFIG = {"group.initial.rebalance.delay.ms": 0, "connections.max.idle.ms": 20_000,
          "controlled.shutdown.timeout.ms": 5_000}
SEED = 27


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


class Storm:
    """Admin clients hammering colliding names, a group member churning, a processor killer; what each saw."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        self.broker = broker
        self.stop = threading.Event()
        self.outcomes: dict[str, int] = {}
        self.unexpected: list[BaseException] = []
        self.kills = 0
        self._lock = threading.Lock()

    def run(self) -> None:
        threads = [threading.Thread(target=self._guard, args=(self._admin, i)) for i in range(CLIENTS)]
        threads += [threading.Thread(target=self._guard, args=(self._member, 0)),
                    threading.Thread(target=self._guard, args=(self._killer, 0))]
        for thread in threads:
            thread.start()
        time.sleep(STORM_S)
        self.stop.set()
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive(), f"{thread.name} still waiting 60 s after the storm"

    def _count(self, what: str) -> None:
        with self._lock:
            self.outcomes[what] = self.outcomes.get(what, 0) + 1

    def _guard(self, body, index: int) -> None:
        try:
            body(index)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.unexpected.append(exc)

    def _admin(self, index: int) -> None:
        rng = random.Random(SEED + index)
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap, request_timeout_ms=10_000,
                                 client_id=f"storm-{index}")
        ops = [self._create, self._delete, self._grow, self._delete_records, self._groups]
        try:
            while not self.stop.is_set():
                op = rng.choice(ops)
                try:
                    op(admin, rng)
                    self._count(f"{op.__name__[1:]}: ok")
                except KafkaError as exc:  # a refusal, a timeout, a connection a killed processor dropped
                    self._count(f"{op.__name__[1:]}: {exc.__class__.__name__}")
        finally:
            admin.close()

    @staticmethod
    def _create(admin, rng) -> None:
        admin.create_topics([NewTopic(rng.choice(NAMES), 2, 1)], timeout_ms=5_000)

    @staticmethod
    def _delete(admin, rng) -> None:
        admin.delete_topics([rng.choice(NAMES)], timeout_ms=5_000)

    @staticmethod
    def _grow(admin, rng) -> None:
        admin.create_partitions({rng.choice(NAMES): NewPartitions(rng.randint(3, 4))}, timeout_ms=5_000)

    @staticmethod
    def _delete_records(admin, rng) -> None:
        admin.delete_records({TopicPartition(rng.choice(NAMES), 0): -1}, timeout_ms=5_000)

    @staticmethod
    def _groups(admin, rng) -> None:
        group = rng.choice(GROUPS)
        rng.choice([lambda: admin.list_groups(), lambda: admin.describe_groups([group]),
                    lambda: admin.delete_groups([group]), lambda: admin.list_group_offsets(group)])()

    def _member(self, _index: int) -> None:
        while not self.stop.is_set():
            consumer = Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": GROUPS[0],
                                 "session.timeout.ms": 6_000, "auto.offset.reset": "earliest",
                                 "topic.metadata.refresh.interval.ms": 500})
            consumer.subscribe([NAMES[0]])
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and not self.stop.is_set():
                consumer.poll(0.2)
            consumer.close()
            self._count("member: joined and left")

    def _killer(self, _index: int) -> None:
        while not self.stop.wait(KILL_EVERY_S):
            pids = self.broker.processor_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                self.kills += 1


def test_a_storm_on_colliding_names_with_processor_deaths_leaves_a_broker_that_serves(tmp_path):
    with EmbeddedBroker(tmp_path, processors=2, config=CONFIG) as broker:
        rss_before = rss_kib(broker.pid)
        storm = Storm(broker)
        storm.run()
        print("storm outcomes:", dict(sorted(storm.outcomes.items())), "kills:", storm.kills)
        assert not storm.unexpected, storm.unexpected
        assert storm.kills >= 3
        assert sum(n for k, n in storm.outcomes.items() if k.startswith("create: ")) > 20
        wait_for_processors(broker, 2)
        assert broker.proc.poll() is None
        deaths = [line for line in broker.log_lines if re.search(r"processor \d+ \(pid \d+\) died", line)]
        assert all("signal SIGKILL" in line for line in deaths), deaths  # the killer's, none of the storm's
        assert not [line for line in broker.log_lines if "Exception in thread" in line or "died:" in line]
        new_client_round_trip(broker)
        assert rss_kib(broker.pid) - rss_before < 200 * 1024, "the main process grew by 200 MiB"
        assert broker.stop() == 0


def wait_for_processors(broker: EmbeddedBroker, count: int, timeout: float = 30.0) -> None:
    wait_for(lambda: len(broker.processor_pids()) >= count, timeout, f"{count} processors", interval=0.1,
             show=broker.processor_pids)


def new_client_round_trip(broker: EmbeddedBroker) -> None:
    """A topic auto-created by a new producer, 100 records acknowledged, and a new group reading them all."""
    topic, delivered = "after-the-storm", []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30_000})
    for i in range(100):
        producer.produce(topic, b"%03d" % i, partition=0,
                         on_delivery=lambda err, msg: delivered.append(err or msg.offset()))
    assert producer.flush(40) == 0
    assert sorted(delivered) == list(range(100)), delivered[:5]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "after-the-storm",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline, values = time.monotonic() + 40, []
    while len(values) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    assert values == [b"%03d" % i for i in range(100)]
