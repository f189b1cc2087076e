"""Where a new topic's replicas go: Kafka's rack-unaware spread over the live brokers.

Partition p's first replica (its preferred leader) is broker (start + p) mod n, so
leaders go round the brokers; the other replicas follow it at a shift that is the
same for a whole round of n partitions and moves by one each round, so the
followers of one broker's leaders are spread over the others too. No two replicas
of a partition share a broker. `start` and the first shift are random, as Kafka's
are, so many small topics do not all lead on the same broker.
"""

from __future__ import annotations

import random

from mmlog.errors import InvalidReplicationFactor


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    rng: random.Random | None = None) -> list[list[int]]:
    """Replicas of each partition, the preferred leader first."""
    brokers = sorted(brokers)
    n = len(brokers)
    if replication_factor < 1:
        raise InvalidReplicationFactor(f"replication factor {replication_factor}: it must be at least 1")
    if replication_factor > n:
        raise InvalidReplicationFactor(
            f"replication factor {replication_factor} larger than the {n} available broker{'s' * (n != 1)}")
    rng = rng or random.Random()
    start, shift = rng.randrange(n), rng.randrange(n)
    out = []
    for p in range(partitions):
        if p and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out
