"""Exactly once end to end: a consume-transform-produce loop on librdkafka's transactions, SIGKILLed at
random points (the worker and the broker that coordinates it), ends with every input in the output once."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter

import confluent_kafka
from confluent_kafka import TopicPartition

from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from mmlog.testing.wait import wait_for

CONFIG = {"transaction.state.log.num.partitions": 2,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
INPUTS, PARTITIONS = 3000, 2


def start_worker(broker):
    return subprocess.Popen([sys.executable, "-m", "mmlog.testing.ctp_worker", broker.bootstrap, "ctp-in", "ctp-out",
                             "ctp-group", "ctp-worker", str(PARTITIONS)], stderr=subprocess.PIPE, text=True)


def written(broker, topic: str) -> int:
    """Records in the topic's logs, committed or not (the sum of the high watermarks)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp-watch"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


def read_committed(broker, topic: str) -> list[bytes]:
    """Every value a read_committed consumer reads from the start up to a last record written to each
    partition now: a partition is read in order, so whatever was written twice shows before it."""
    last = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(PARTITIONS):
        last.produce(topic, b"last", partition=p)
    assert last.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp-check",
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    values, ends = [], []
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def to_the_ends():
            for m in consumer.consume(500, timeout=0.1):
                if not m.error():
                    (ends if m.value() == b"last" else values).append(m.value())
            return len(ends) == PARTITIONS

        wait_for(to_the_ends, timeout=120, interval=0, retry=(), what="the last record of every partition",
                 show=lambda: (len(values), len(ends)))
        return values
    finally:
        consumer.close()


def test_a_transform_loop_killed_at_random_points_writes_every_input_exactly_once(tmp_path):
    rng = random.Random(15)
    with EmbeddedBroker(tmp_path / "b", processors=2, config=CONFIG) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("ctp-in", PARTITIONS)
            admin.create_topic("ctp-out", PARTITIONS)
        source = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(INPUTS):
            source.produce("ctp-in", b"in-%d" % i, partition=i % PARTITIONS)
        source.flush(30)
        kills = ["worker", "worker", "broker", "worker", "worker"]
        worker, failures, progress = start_worker(broker), [], []
        try:
            for victim in kills:
                time.sleep(rng.uniform(0.8, 2.0))
                progress.append(written(broker, "ctp-out"))
                if victim == "broker":
                    broker.kill()
                    time.sleep(0.2)
                    broker.start()
                else:
                    worker.kill()
                    worker.wait(10)
                    worker = start_worker(broker)
            while worker.wait(90) != 0:  # a worker that failed (the broker went away under it): again
                failures.append(worker.stderr.read().strip()[-300:])
                assert len(failures) < 10, failures
                worker = start_worker(broker)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        out = read_committed(broker, "ctp-out")
    assert progress[-1] < INPUTS, f"the loop had finished before the last kill: {progress}"
    copies = Counter(out)
    assert not [v for v, n in copies.items() if n > 1], "an input was written twice"
    assert set(copies) == {b"in-%d!" % i for i in range(INPUTS)}, "inputs missing from the output"
