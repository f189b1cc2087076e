"""The leader's replication throttle in a processor: Kafka's `leader.replication.throttled.rate`.

A follower's Fetch of a partition whose topic's `leader.replication.throttled.replicas`
names this broker (`config/throttled_replicas.py`), from a follower outside the ISR, is
throttled (Kafka's ReplicaManager.shouldLeaderThrottle): while the bytes sent to such
fetches exceed the rate, the partition is answered without records (its high watermark
and log start still go back), and each answer that carries records counts their bytes.
Followers of one leader may fetch through any processor, so the bytes are counted in the
broker's quota block (`ipc/quota_block.py`), on one sensor that every processor records
into and reads: the rate is the sum over processors, over `quota.window.num` windows of
`quota.window.size.seconds` (Kafka's replication quota samples its own 11 x 1 s windows).
A throttled partition's read asks for at most a quarter second's worth, so one answer
does not overshoot by a whole `replica.fetch.max.bytes` (the follower side does the same).

The rate is the dynamic broker config (this broker's, else the cluster default's), else
server.properties'; it is read again with the catalogue (`worker._notice_catalogue`).
Nothing here runs for consumers' fetches, nor for followers' while no rate is set.
"""

from __future__ import annotations

import time

from mmlog.config import throttled_replicas
from mmlog.config.broker import BROKER_SETTINGS
from mmlog.config.dynamic import merged

RATE = "leader.replication.throttled.rate"
SENSOR = "LeaderReplication"  # Kafka's quota type name: no client sensor is named so ("<key>:<user>:<client>")
UNLIMITED = 2**63 - 1


def _now_ms() -> int:
    return int(time.time() * 1000)


class LeaderThrottle:
    """One processor's view of the leader's replication rate (shared across processors by the quota block)."""

    def __init__(self, block, writer: int, manager, broker_id: int, configured: int = UNLIMITED) -> None:
        self.block = block
        self.writer = writer
        self.manager = manager
        self.broker_id = broker_id
        self.configured = configured  # server.properties' rate
        self.rate = UNLIMITED
        self.active = False  # a rate is set: what the fetch path checks (one attribute)
        self._slot = -1

    def refresh(self) -> None:
        """Take the rate in force now (the dynamic configs the manager holds, else the static one)."""
        values = merged(self.manager.dynamic.get("brokers", {}), self.broker_id)
        self.rate = BROKER_SETTINGS[RATE].parse(values.get(RATE, self.configured))
        self.active = self.block is not None and self.rate < UNLIMITED
        if self.active:
            self._slot = self.block.slot(SENSOR, _now_ms())  # claimed again: an idle slot may have been reused

    def applies(self, log, partition: int, follower: int) -> bool:
        """Whether this follower's fetch of the partition is throttled: named by its topic's config, and the
        follower is out of the ISR."""
        return (throttled_replicas.throttles(log.config.leader_replication_throttled_replicas, self.broker_id,
                                             partition)
                and follower not in log.replication().isr)

    def exceeded(self) -> bool:
        """Whether the bytes sent to throttled followers are over the rate (they get no records now)."""
        return self.block.measure(self._slot, _now_ms())[0] > self.rate

    def max_bytes(self, limit: int) -> int:
        """What one throttled partition may send per fetch: a quarter second's worth at most."""
        return max(1, min(limit, self.rate // 4))

    def record(self, nbytes: int) -> None:
        """Record bytes sent to a throttled follower."""
        self.block.record(self._slot, self.writer, _now_ms(), nbytes)
