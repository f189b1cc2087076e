"""Partition limits and the auto-creation budget: checked before anything is created.

A partition costs a directory, files, descriptors and memory in every broker that
hosts a replica of it, so the counts a client asks for are checked first, against
the broker's settings, while checking still costs nothing:

- `max.partitions.per.request`: partitions one CreateTopics request may create (all
  its topics together), and one auto-created topic. One topic asking for more is
  INVALID_PARTITIONS; a topic that takes the request's running total past it is
  POLICY_VIOLATION. 2^31-1 partitions is refused as cheaply as 2.
- `max.partitions.per.broker`: replicas one broker may host, counted over the
  whole catalogue (every broker's catalogue holds every topic) plus the new
  topic's assignment: POLICY_VIOLATION naming the broker.
- `auto.create.topics.max.per.request` / `.max.per.second`: how many unknown topics
  a Metadata request may auto-create, from a token bucket holding one second's
  worth; names past either cap answer LEADER_NOT_AVAILABLE (as Kafka answers a
  topic being created) and are created when clients ask again.
"""

from __future__ import annotations

import time
from collections import Counter

from mmlog.errors import InvalidPartitions, PolicyViolation


class PartitionLimits:
    """The broker's partition limits, checked by the control plane and the stores."""

    def __init__(self, config) -> None:
        self.per_request = config["max.partitions.per.request"]
        self.per_broker = config["max.partitions.per.broker"]

    def check_topic(self, name: str, partitions: int, requested_so_far: int = 0) -> None:
        """A topic of `partitions` partitions, after `requested_so_far` earlier in the same request."""
        if partitions > self.per_request:
            raise InvalidPartitions(f"topic {name!r}: {partitions} partitions is more than "
                                    f"max.partitions.per.request ({self.per_request})")
        if requested_so_far + partitions > self.per_request:
            raise PolicyViolation(f"topic {name!r}: {requested_so_far} partitions earlier in this request plus "
                                  f"{partitions} is more than max.partitions.per.request ({self.per_request})")

    def check_hosting(self, name: str, hosted: Counter, partitions: int, assignment: list[list[int]] | None,
                      standalone_id: int) -> None:
        """Would the new topic take a broker past max.partitions.per.broker? `hosted`: replicas per broker now."""
        if assignment is None:
            new = Counter({standalone_id: partitions})
        else:
            new = Counter(b for replicas in assignment for b in replicas)
        for broker, count in sorted(new.items()):
            if hosted.get(broker, 0) + count > self.per_broker:
                raise PolicyViolation(f"topic {name!r}: broker {broker} hosts {hosted.get(broker, 0)} partition "
                                      f"replicas and would host {count} more, past max.partitions.per.broker "
                                      f"({self.per_broker})")


def hosted_replicas(manager, standalone_id: int) -> Counter:
    """Partition replicas per broker id over a `LogManager`'s catalogue (kept counted by the manager:
    a recount per creation made 2,000 auto-created topics quadratic)."""
    counts = manager.replica_counts()
    counts[standalone_id] += counts.pop(None, 0)
    return counts


class TokenBucket:
    """`rate` tokens a second, holding at most one second's worth (the auto-creation budget)."""

    def __init__(self, rate: int, clock=time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.tokens = float(rate)
        self.stamp = clock()

    def take(self, wanted: int) -> int:
        """Take up to `wanted` whole tokens; returns how many were granted."""
        now = self.clock()
        self.tokens = min(float(self.rate), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted
