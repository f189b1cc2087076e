"""Consumer groups as the console shows them: a searchable page of groups, one group's members, offsets and lag.

Everything is asked with the session's admin client (the logged-in user's), so the broker's ACLs decide what
is listed and described. A page costs one ListGroups per broker, then only the groups on the page are
described and get their committed offsets (one OffsetFetch each) and the end offsets of their partitions
(one ListOffsets per leader for the whole page): a thousand groups answer a page as fast as ten.
"""

from __future__ import annotations

from mmlog.client.admin_offsets import LATEST
from mmlog.client.records import TopicPartition


def lags(admin, groups: list[str], nodes: dict[str, int] | None = None) -> dict[str, dict[TopicPartition, tuple]]:
    """Per group, per committed partition: (committed offset, end offset) -- the end as a read_committed
    consumer sees it (None for a partition offline or gone). `nodes`: the groups' coordinators, if known."""
    nodes = nodes or admin.coordinators(groups)
    committed = {group: admin.committed_offsets(group, nodes[group]) for group in groups}
    wanted = {tp for offsets in committed.values() for tp in offsets}
    ends = admin.partition_offsets(wanted, LATEST, read_committed=True) if wanted else {}
    return {group: {tp: (offset, ends.get((tp.topic, tp.partition))) for tp, offset in offsets.items()}
            for group, offsets in committed.items()}


def total_lag(partitions: dict) -> int:
    """The lag summed over a group's partitions (those with an end offset)."""
    return sum(max(0, end - done) for done, end in partitions.values() if end is not None)


def group_rows(admin, names: list[str]) -> list[dict]:
    """The rows of a page of groups: state, protocol, members, topics and lag of each."""
    nodes = admin.coordinators(names)
    described = admin.describe_groups(names, nodes) if names else {}
    offsets = lags(admin, names, nodes)
    rows = []
    for name in names:
        d = described.get(name)
        parts = offsets.get(name, {})
        rows.append({"group": name, "state": d.state if d else "Unknown",
                     "protocol_type": d.protocol_type if d else "", "protocol": d.protocol if d else "",
                     "members": len(d.members) if d else 0, "topics": sorted({tp.topic for tp in parts}),
                     "partitions": len(parts), "lag": total_lag(parts)})
    return rows


def group_detail(admin, group: str) -> dict:
    """One group: state, protocol, members and their assignments, every partition's offsets and lag."""
    d = admin.describe_group(group)
    committed = lags(admin, [group])[group]
    owners = {tp: m.member_id for m in d.members for tp in m.assignment}
    missing = [tp for tp in owners if tp not in committed]  # assigned, nothing committed yet
    ends = admin.partition_offsets(missing, LATEST, read_committed=True) if missing else {}
    partitions = []
    for tp in sorted(set(committed) | set(owners)):
        done, end = committed.get(tp, (None, ends.get((tp.topic, tp.partition))))
        lag = None if done is None or end is None else max(0, end - done)
        partitions.append({"topic": tp.topic, "partition": tp.partition, "committed": done, "end": end,
                           "lag": lag, "member": owners.get(tp)})
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "instance_id": m.group_instance_id, "topics": m.topics,
                "assignment": [[tp.topic, tp.partition] for tp in m.assignment]} for m in d.members]
    return {"group": d.group_id, "state": d.state, "protocol_type": d.protocol_type, "protocol": d.protocol,
            "members": members, "partitions": partitions, "lag": total_lag(committed)}
