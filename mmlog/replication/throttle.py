"""The follower's replication throttle: Kafka's `follower.replication.throttled.rate`, in bytes/s.

The throttled replicas are those the topics' `follower.replication.throttled.replicas`
name on this broker (`config/throttled_replicas.py`; `mmlog reassign --throttle` names
the replicas a move adds, as kafka-reassign-partitions.sh does), and only while they
are out of the ISR (`source.py`): the main process lists them in the fetch plan, with
the rate (`fetch_plan.py`). One throttle serves every source thread of the fetcher
process, so the rate bounds the broker's whole catch-up, as Kafka's follower quota does.

A token bucket holding one second's worth: each fetch answer takes the bytes it
brought for throttled partitions; while the bucket is below zero a source thread
leaves its throttled partitions out of its next fetch (Kafka's follower leaves
them out of its fetch request while the quota is exceeded). Each throttled
partition asks for at most a quarter second's worth per fetch (at least one batch
comes anyway), so one answer does not overshoot by a whole replica.fetch.max.bytes.
"""

from __future__ import annotations

import threading
import time

UNLIMITED = 2**63 - 1


class Throttle:
    """Bytes/s over the throttled partitions of every source thread of this broker."""

    def __init__(self) -> None:
        self.rate = UNLIMITED
        self.partitions: frozenset[tuple[str, int]] = frozenset()
        self._tokens = 0.0
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def update(self, rate: int, partitions) -> None:
        with self._lock:
            if rate != self.rate:
                self._tokens, self._at = min(self._tokens, rate), time.monotonic()
            self.rate = rate
            self.partitions = frozenset(partitions)

    @property
    def active(self) -> bool:
        return self.rate < UNLIMITED and bool(self.partitions)

    def exceeded(self) -> bool:
        """Whether throttled partitions must wait (the bucket is below zero)."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
            self._at = now
            return self._tokens < 0

    def record(self, size: int) -> None:
        """A fetch brought `size` bytes of throttled partitions."""
        with self._lock:
            self._tokens -= size

    def max_bytes(self, default: int) -> int:
        """What one throttled partition may ask for per fetch."""
        return max(1, min(default, self.rate // 4))
