"""CreatePartitions' checks: may a topic grow to `count` partitions, with these replicas?

Kafka's rules and messages (`ZkAdminManager.createPartitions`,
`AdminZkClient.createNewPartitionsAssignment`), in Kafka's order: the topic must
exist; the count must grow (INVALID_PARTITIONS); an explicit assignment names only
live brokers and exactly one replica list per new partition; each list is non-empty,
without duplicates, and as long as partition 0's (INVALID_REPLICA_ASSIGNMENT). Every
check runs before anything changes, so a refused topic changes nothing.

Growing a topic changes where keys go: a keyed producer maps a key to
murmur2(key) % partitions, so after the growth most keys land on another
partition than before; records already written stay where they are.
"""

from __future__ import annotations

from mmlog.errors import InvalidPartitions, InvalidReplicaAssignment


def check_growth(name: str, current: int, count: int, assignments: list[list[int]] | None,
                 brokers: list[int], replication_factor: int) -> list[list[int]] | None:
    """The explicit replicas of the new partitions (None: none given), checked."""
    if count < current:
        raise InvalidPartitions(f"Topic currently has {current} partitions, which is higher than the "
                                f"requested {count}.")
    if count == current:
        raise InvalidPartitions(f"Topic already has {current} partitions.")
    if assignments is None:
        return None
    unknown = sorted({b for replicas in assignments for b in replicas} - set(brokers))
    if unknown:
        raise InvalidReplicaAssignment(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(assignments) != count - current:
        raise InvalidReplicaAssignment(f"Increasing the number of partitions by {count - current} but "
                                       f"{len(assignments)} assignments provided.")
    bad = []
    for p, replicas in enumerate(assignments, start=current):
        if not replicas:
            raise InvalidReplicaAssignment(f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(f"Duplicate brokers not allowed in replica assignment: "
                                           f"{', '.join(map(str, replicas))} for partition id {p}.")
        if len(replicas) != replication_factor:
            bad.append((p, len(replicas)))
    if bad:
        raise InvalidReplicaAssignment(
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while "
            f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
            f"[{', '.join(str(r) for _, r in bad)}], respectively.")
    return [list(r) for r in assignments]
