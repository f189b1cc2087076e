"""Partition assignors: how a group's leader shares the partitions out among the members.

Pure functions of (member subscriptions, partition counts), run by the member the
coordinator elects leader, whose answer travels to everyone in SyncGroup. Both are
Kafka's own, to the partition, so an mmlog consumer can lead a group of Java,
librdkafka or kafka-python consumers (and be led by one) under the same names:

*range* (`RangeAssignor`; the Kafka paper's Algorithm 1). Per topic, lay the
partitions out in order and the members subscribed to it in order, and give each
member a contiguous chunk: with n partitions and k members, every member gets
n // k and the first n % k get one more. Per topic means members subscribed to
several topics tend to get the lower partitions of each (the first member gets
the extra partition of every topic).

    t0 with 3 partitions, t1 with 3, members C0 C1:  C0 t0-0 t0-1 t1-0 t1-1 | C1 t0-2 t1-2

*roundrobin* (`RoundRobinAssignor`). Every partition of every subscribed topic,
sorted by (topic, partition), dealt in turn to the members in order, skipping a
member that is not subscribed to that partition's topic.

    same input:                                      C0 t0-0 t0-2 t1-1      | C1 t0-1 t1-0 t1-2

Member order is Java's `MemberInfo` order: members with a group instance id
(static members, KIP-345) first, by instance id, so a restarted static member
gets its old partitions back; then the others by member id. Topics without
metadata (unknown, or no partitions) are left out, as Kafka's assignors log and
skip them.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from mmlog.client.records import TopicPartition

Subscriptions = Mapping[str, Iterable[str]]  # member id -> subscribed topics
Assignment = dict[str, list[TopicPartition]]  # member id -> its partitions, sorted


def member_order(member_ids: Iterable[str], instance_ids: Mapping[str, str | None] | None = None) -> list[str]:
    """Java's MemberInfo order: static members by group instance id, then dynamic ones by member id."""
    instance_ids = instance_ids or {}

    def key(member_id: str):
        instance = instance_ids.get(member_id)
        return (0, instance, member_id) if instance is not None else (1, member_id, "")

    return sorted(member_ids, key=key)


def range_assign(subscriptions: Subscriptions, partitions: Mapping[str, int],
                 instance_ids: Mapping[str, str | None] | None = None) -> Assignment:
    """Kafka's RangeAssignor: per topic, contiguous chunks; the first n % k members get one extra."""
    topics = {member: set(ts) for member, ts in subscriptions.items()}
    order = member_order(topics, instance_ids)
    out: Assignment = {member: [] for member in order}
    for topic in sorted(set().union(*topics.values())):
        n = partitions.get(topic) or 0
        if n <= 0:
            continue
        members = [m for m in order if topic in topics[m]]
        per_member, extra = divmod(n, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            out[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return out  # sorted already: topics in order, each member's chunk in order


def roundrobin_assign(subscriptions: Subscriptions, partitions: Mapping[str, int],
                      instance_ids: Mapping[str, str | None] | None = None) -> Assignment:
    """Kafka's RoundRobinAssignor: all partitions sorted, dealt in turn, skipping unsubscribed members."""
    topics = {member: set(ts) for member, ts in subscriptions.items()}
    order = member_order(topics, instance_ids)
    out: Assignment = {member: [] for member in order}
    if not order:
        return out
    turn = 0
    for topic in sorted(set().union(*topics.values())):
        for p in range(partitions.get(topic) or 0):
            while topic not in topics[order[turn]]:  # someone is subscribed: the topic came from a member
                turn = (turn + 1) % len(order)
            out[order[turn]].append(TopicPartition(topic, p))
            turn = (turn + 1) % len(order)
    return out


ASSIGNORS: dict[str, Callable[..., Assignment]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
}
