"""Kafka's `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` topic configs.

A value names the replicas whose replication is throttled, as `partition:broker` pairs
(`0:101,1:102`), or `*` for every replica of the topic; empty throttles none. Each broker
keeps the pairs that name it (Kafka's TopicConfigHandler.parseThrottledPartitions): on the
leader side the partitions it leads whose followers' fetches it slows
(`replication/leader_throttle.py`), on the follower side the partitions it copies
slowly (`replication/throttle.py`). Either side throttles a replica only while it is out
of the ISR (Kafka's shouldLeaderThrottle / shouldFollowerThrottle): a caught-up follower
is never slowed. The rates are the dynamic broker configs `leader.replication.throttled.rate`
and `follower.replication.throttled.rate`. The admin client writes these values
(`mmlog/client/admin_replicas.py`, which keeps its own copy of the names: the client does not
import the broker's config package).
"""

from __future__ import annotations

import re
from functools import lru_cache

LEADER, FOLLOWER = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
RULE = "must be the literal '*' or a list of replicas in the following format: " \
       "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
ALL = None  # every partition of the topic ('*')
_PAIR = re.compile(r"[0-9]+:[0-9]+")


def valid(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: '*', or comma-separated pairs (empty items allowed: '' throttles
    none)."""
    items = [item.strip() for item in str(value).split(",")]
    return items == ["*"] or all(not item or _PAIR.fullmatch(item) for item in items)


@lru_cache(maxsize=1024)
def partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions whose replica on `broker_id` the value throttles; ALL (None) for '*'."""
    items = [item.strip() for item in str(value).split(",") if item.strip()]
    if items == ["*"]:
        return ALL
    pairs = (item.split(":") for item in items)
    return frozenset(int(p) for p, b in pairs if int(b) == broker_id)


def throttles(value: str, broker_id: int, partition: int) -> bool:
    """Whether the value throttles the replica of `partition` on `broker_id`."""
    if not value:
        return False
    found = partitions(value, broker_id)
    return found is ALL or partition in found
