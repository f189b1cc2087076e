"""Exactly once end to end: a consume-transform-produce loop on librdkafka's transactions, SIGKILLed at
random points of its run (the worker and the broker that coordinates it), ends with every input in the
output once."""

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


STALL_S = 15  # a worker whose output has not grown for this long is killed and started again


class Worker:
    """The transform loop's worker process, started again whenever it is killed or fails (the broker went
    away under it), and, as a supervisor would, when it stalls: a librdkafka transactional producer that
    outlived a broker restart has been seen waiting in send_offsets_to_transaction for over a minute, past
    its 30 s timeout, with AddOffsetsToTxn answered and no TxnOffsetCommit sent. librdkafka does not check
    its coordinator requests' timeout, and a cached group coordinator that is not up waits for a broker
    state change (https://github.com/confluentinc/librdkafka/issues/5456 and /issues/5511)."""

    def __init__(self, broker) -> None:
        self.broker, self.failures, self.stalls = broker, [], 0
        self.proc = start_worker(broker)
        self._seen, self._since = -1, time.monotonic()

    def _again_if_ended(self, done_ok: bool) -> None:
        """A new worker if this one failed, or (unless `done_ok`) exited idle: mid-run, 3 s without input
        is a broker restart it waited out, not the end."""
        code = self.proc.poll()
        if code is None or (code == 0 and done_ok):
            return
        if code:
            self.failures.append(self.proc.stderr.read().strip()[-300:])
            assert len(self.failures) < 10, self.failures
        self.proc = start_worker(self.broker)

    def written_past(self, point: float) -> int:
        """The records written to the output, if past `point` (else 0); a worker that ended or stalled is
        started again."""
        self._again_if_ended(done_ok=False)
        n = written(self.broker, "ctp-out")
        if n != self._seen:
            self._seen, self._since = n, time.monotonic()
        elif time.monotonic() - self._since > STALL_S:
            self.stalls += 1
            self.kill_and_restart()
            self._since = time.monotonic()
        return n if n >= point else 0

    def kill_and_restart(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.proc = start_worker(self.broker)

    def finish(self) -> None:
        """Wait for a worker to exit 0 (3 s without input: every input transformed)."""
        while self.proc.wait(90) != 0:
            self._again_if_ended(done_ok=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


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
        # Each kill lands once the output has grown past a random point of the run, not after a random time:
        # a fast loop would otherwise finish before the last kill.
        points = sorted(rng.uniform(0.05, 0.8) * INPUTS for _ in kills)
        loop, progress = Worker(broker), []
        try:
            for victim, point in zip(kills, points):
                progress.append(wait_for(lambda: loop.written_past(point), timeout=60,
                                         what=f"{point:.0f} records written",
                                         show=lambda: (written(broker, "ctp-out"), loop.proc.poll(), loop.failures)))
                if victim == "broker":
                    broker.kill()
                    time.sleep(0.2)
                    broker.start()
                else:
                    loop.kill_and_restart()
            loop.finish()
        finally:
            loop.stop()
        out = read_committed(broker, "ctp-out")
    print(f"\n[exactly once] output at each kill {progress}; failed {len(loop.failures)}, stalled {loop.stalls}")
    assert progress[-1] < INPUTS, f"the loop had finished before the last kill: {progress}"
    copies = Counter(out)
    assert not [v for v, n in copies.items() if n > 1], "an input was written twice"
    assert set(copies) == {b"in-%d!" % i for i in range(INPUTS)}, "inputs missing from the output"
