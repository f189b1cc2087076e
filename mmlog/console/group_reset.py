"""Resetting a group's committed offsets: a dry run that computes the new offsets, then applying them.

As `kafka-consumer-groups --reset-offsets`: to the earliest or latest offset, to the first offset at or
after a timestamp, or to a given offset (kept within the partition's log). Kafka refuses to commit for a
group that has active members (the reset would race its consumers), and the broker's ACLs decide who may
commit for the group (GroupAuthorizationFailed otherwise): the session's client asks, as the user.
"""

from __future__ import annotations

from mmlog.client.admin_offsets import EARLIEST, LATEST
from mmlog.client.records import TopicPartition
from mmlog.errors import UnknownMemberId

TARGETS = ("earliest", "latest", "timestamp", "offset")


class ResetRefused(Exception):
    """A reset the console will not ask for, or the broker refused for the group's state (HTTP 409)."""


class InvalidReset(ValueError):
    """A reset whose target or value does not parse (HTTP 400)."""


def active_members(admin, group: str) -> int:
    return len(admin.describe_group(group).members)


def _refuse_active(group: str, members: int) -> ResetRefused:
    return ResetRefused(f"group {group!r} has {members} active member(s): Kafka resets only the offsets of a "
                        f"group without members; stop its consumers first")


def plan(admin, group: str, target: str, value=None, topics: list[str] | None = None) -> dict:
    """The dry run: each partition's committed offset now and the offset the reset would commit. The
    partitions are the group's committed ones (of `topics` only, when given), or every partition of
    `topics` for a group that has committed none of them."""
    if target not in TARGETS:
        raise InvalidReset(f"reset to one of {', '.join(TARGETS)}, not {target!r}")
    current = admin.committed_offsets(group)
    scope = sorted(tp for tp in current if not topics or tp.topic in topics)
    if topics and not scope:
        scope = [TopicPartition(t, p) for t in topics for p in admin.offsets(t, LATEST, offline=-1)]
    new = _targets(admin, scope, target, value)
    members = active_members(admin, group)
    return {"group": group, "target": target, "value": value, "active_members": members,
            "partitions": [{"topic": tp.topic, "partition": tp.partition, "current": current.get(tp),
                            "new": new[tp]} for tp in scope]}


def _targets(admin, scope: list[TopicPartition], target: str, value) -> dict[TopicPartition, int | None]:
    earliest = admin.partition_offsets(scope, EARLIEST)
    latest = admin.partition_offsets(scope, LATEST)
    if target == "earliest":
        return {tp: earliest[tp] for tp in scope}
    if target == "latest":
        return {tp: latest[tp] for tp in scope}
    number = _integer(value, target)
    if target == "timestamp":
        found = admin.partition_offsets(scope, number)
        return {tp: latest[tp] if found[tp] is None or found[tp] < 0 else found[tp] for tp in scope}
    return {tp: None if earliest[tp] is None else min(max(number, earliest[tp]), latest[tp]) for tp in scope}


def _integer(value, target: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidReset(f"a reset to a {target} needs an integer{' (ms since the epoch)' if target == 'timestamp' else ''}, "
                           f"not {value!r}") from None
    if number < 0:
        raise InvalidReset(f"a {target} is not negative: {number}")
    return number


def apply(admin, group: str, offsets: list[dict]) -> dict:
    """Commit the dry run's new offsets ([{topic, partition, new}]); ResetRefused while the group has
    members, GroupAuthorizationFailed (from the broker) for a user who may not commit for it."""
    chosen = {}
    for row in offsets:
        try:
            chosen[TopicPartition(str(row["topic"]), int(row["partition"]))] = int(row["new"])
        except (KeyError, TypeError, ValueError):
            raise InvalidReset(f"each offset is {{topic, partition, new}}, not {row!r}") from None
    if not chosen:
        raise InvalidReset("no offsets to reset")
    members = active_members(admin, group)
    if members:
        raise _refuse_active(group, members)
    try:
        admin.alter_group_offsets(group, chosen)
    except UnknownMemberId:
        raise _refuse_active(group, active_members(admin, group)) from None  # a consumer joined meanwhile
    return {"group": group, "applied": [{"topic": tp.topic, "partition": tp.partition, "offset": o}
                                        for tp, o in sorted(chosen.items())]}
