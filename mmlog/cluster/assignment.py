"""Where a new topic's replicas go: Kafka's rack-unaware spread over the live brokers.

Partition p's first replica (its preferred leader) is broker (start + p) mod n, so
leaders go round the brokers; the other replicas follow it at a shift that is the
same for a whole round of n partitions and moves by one each round, so the
followers of one broker's leaders are spread over the others too. No two replicas
of a partition share a broker. `start` and the first shift are random, as Kafka's
are, so many small topics do not all lead on the same broker.

Partitions added to a topic later (CreatePartitions) continue the same spread:
numbering goes on from the topic's partition count (`first_partition`), and the
start and the first shift are the index of partition 0's preferred leader among
the live brokers (Kafka's `createNewPartitionsAssignment`), so the new partitions'
leaders go on round the brokers where the old ones stopped.
"""

from __future__ import annotations

import random

from mmlog.errors import InvalidReplicationFactor


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    rng: random.Random | None = None, *, start: int | None = None,
                    first_partition: int = 0) -> list[list[int]]:
    """Replicas of each partition (numbered from `first_partition`), the preferred leader first.

    `start`: a fixed index into the sorted brokers for the first leader and the first shift
    (None: random, as for a new topic)."""
    brokers = sorted(brokers)
    n = len(brokers)
    if replication_factor < 1:
        raise InvalidReplicationFactor(f"replication factor {replication_factor}: it must be at least 1")
    if replication_factor > n:
        raise InvalidReplicationFactor(
            f"replication factor {replication_factor} larger than the {n} available broker{'s' * (n != 1)}")
    rng = rng or random.Random()
    if start is None:
        start, shift = rng.randrange(n), rng.randrange(n)
    else:
        shift = start
    out = []
    for p in range(first_partition, first_partition + partitions):
        if p and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out


def next_partitions(brokers: list[int], existing: list[list[int]], count: int) -> list[list[int]]:
    """Replicas of the partitions a topic with `existing` replicas gains when it grows to `count`
    (the replication factor of partition 0, spread on from where the topic's spread stopped)."""
    brokers = sorted(brokers)
    first_leader = existing[0][0]
    start = next((i for i, b in enumerate(brokers) if b >= first_leader), 0)
    return assign_replicas(brokers, count - len(existing), len(existing[0]), start=start,
                           first_partition=len(existing))
