"""A steady librdkafka load for failover tests and soaks: `Writer` produces unique values round-robin over a
topic's partitions and keeps when each acknowledgement came, so that a fault's unavailability can be measured.

Needs confluent-kafka (the `test` extra).
"""

from __future__ import annotations

import threading
import time

import confluent_kafka


class Writer(threading.Thread):
    """librdkafka producing unique values (`<prefix>-<n>`) round-robin over a topic's partitions at a steady
    rate; keeps each acknowledged value's partition, offset and when its acknowledgement came."""

    def __init__(self, brokers, topic: str, partitions: int, acks: str, idempotent: bool, rate: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.prefix = b"all" if acks == "all" else b"one"
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": ",".join(b.bootstrap for b in brokers), "acks": acks,
            "enable.idempotence": idempotent, "linger.ms": 5, "retry.backoff.ms": 100,
            "message.timeout.ms": 120_000, "request.timeout.ms": 4000,  # a zombie's parked acks=all answer sooner
            "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000})
        self.acked: dict[bytes, tuple[int, int, float]] = {}  # value -> (partition, offset, monotonic ack time)
        self.errors: list = []
        self.sent = 0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _delivered(self, err, msg) -> None:
        if err is None:
            with self._lock:  # the test's thread reads acked while this one writes it
                self.acked[msg.value()] = (msg.partition(), msg.offset(), time.monotonic())
        else:
            self.errors.append(err)

    def snapshot(self) -> list[tuple[bytes, tuple[int, int, float]]]:
        """The acknowledgements so far: (value, (partition, offset, ack time))."""
        with self._lock:
            return list(self.acked.items())

    def run(self) -> None:
        step = max(1, self.rate // 50)
        while not self._halt.is_set():
            for _ in range(step):
                self.producer.produce(self.topic, b"%s-%08d" % (self.prefix, self.sent),
                                      partition=self.sent % self.partitions, on_delivery=self._delivered)
                self.sent += 1
            self.producer.poll(0.02)
        self.producer.flush(150)
        self.producer = None  # librdkafka's handle goes now, not when the collector gets to it

    def stop(self) -> None:
        self._halt.set()
        self.join(160)

    def acks_after(self, p: int, t: float) -> list[float]:
        return sorted(at for _, (q, _, at) in self.snapshot() if q == p and at > t)

    def longest_gaps(self, start: float, end: float) -> dict[int, float]:
        """Per partition: the longest time without an acknowledgement in [start, end]. From a fault to after
        it was undone, it is the partition's unavailability: for a partition whose leader was cut, the time
        from its last acknowledgement through the old leader to the first through the new one."""
        gaps = {}
        for p in range(self.partitions):
            times = [start] + [t for t in self.acks_after(p, start) if t <= end] + [end]
            gaps[p] = round(max(b - a for a, b in zip(times, times[1:])), 2)
        return gaps
