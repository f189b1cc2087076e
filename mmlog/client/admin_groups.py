"""The admin client's consumer-group operations: list, describe, offsets and lag, delete, reset.

A mixin of `Admin` (admin.py). Group questions go to the group's coordinator (FindCoordinator),
ListGroups to every broker."""

from __future__ import annotations

from dataclasses import dataclass, field

from mmlog.client import consumer_protocol as cp
from mmlog.client.admin_offsets import LATEST
from mmlog.client.records import TopicPartition
from mmlog.errors import UnknownTopicOrPartition, error_for_code
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import (delete_groups, describe_groups, find_coordinator, list_groups, offset_commit,
                                     offset_delete, offset_fetch)


@dataclass
class MemberDescription:
    """One member of a group. For protocol type "consumer", its subscribed topics and assigned
    partitions (decoded; empty while the group is not Stable, as the coordinator only reports
    them then); raw bytes for other protocol types are left out."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    topics: list[str] = field(default_factory=list)
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class GroupDescription:
    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead (unknown group)
    protocol_type: str  # "consumer" for consumer groups
    protocol: str  # the assignor (range, roundrobin, ...) while Stable
    members: list[MemberDescription] = field(default_factory=list)


@dataclass
class GroupOffset:
    """A partition of a group: its committed offset, the partition's latest offset (its end as a
    read_committed consumer sees it: the last stable offset, so an open transaction is not counted as
    lag the group could consume) and the lag between them, latest - committed (None where nothing is
    committed, or the topic is gone)."""

    committed: int | None
    latest: int | None
    lag: int | None
    member_id: str | None = None  # the member it is assigned to now, if any


class GroupAdmin:
    """Consumer groups as an operator sees them: members, assignments, committed offsets and lag."""

    def list_groups(self) -> dict[str, str]:
        """Every group the brokers coordinate, and its protocol type ("consumer" for consumer groups;
        "" for a group that only has committed offsets)."""
        self.cluster.refresh([])
        out: dict[str, str] = {}
        for node in sorted(self.cluster.brokers):
            body = self._request(node, list_groups.API_KEY, 2, list_groups.REQUEST())
            if body.error_code:
                raise error_for_code(body.error_code, f"ListGroups on node {node}")
            for g in body.groups:
                out[g.group_id] = g.protocol_type
        return dict(sorted(out.items()))

    def describe_group(self, group: str) -> GroupDescription:
        """State, protocol and members (with their topics and partitions) of a group; state "Dead" and no
        members for a group the coordinator does not know."""
        return self.describe_groups([group])[group]

    def describe_groups(self, groups: list[str], nodes: dict[str, int] | None = None) -> dict[str, GroupDescription]:
        """`describe_group` of several groups: one DescribeGroups per coordinator (`nodes`: theirs, from
        `coordinators`, when the caller has them). The first group refused (GroupAuthorizationFailed, ...)
        raises."""
        by_node: dict[int, list[str]] = {}
        for group, node in (nodes or self.coordinators(groups)).items():
            by_node.setdefault(node, []).append(group)
        out = {}
        for node, names in by_node.items():
            body = self._request(node, describe_groups.API_KEY, 4, describe_groups.REQUEST(
                groups=names, include_authorized_operations=False))
            for g in body.groups:
                if g.error_code:
                    raise error_for_code(g.error_code, f"DescribeGroups {g.group_id!r}")
                out[g.group_id] = _description(g)
        return {group: out[group] for group in groups if group in out}

    def coordinators(self, groups: list[str]) -> dict[str, int]:
        """Each group's coordinator (one FindCoordinator each), for the calls that take `node`."""
        return {group: self._coordinator(group) for group in groups}

    def committed_offsets(self, group: str, node: int | None = None) -> dict[TopicPartition, int]:
        """The group's committed offset of every partition it committed one for (OffsetFetch); `node`: its
        coordinator, when the caller knows it."""
        body = self._request(self._coordinator(group) if node is None else node, offset_fetch.API_KEY, 5, offset_fetch.REQUEST(
            group_id=group, topics=None))
        if body.error_code:
            raise error_for_code(body.error_code, f"OffsetFetch {group!r}")
        return {TopicPartition(t.name, p.partition_index): p.committed_offset
                for t in body.topics for p in t.partitions if p.committed_offset >= 0}

    def group_offsets(self, group: str,
                      description: GroupDescription | None = None) -> dict[TopicPartition, GroupOffset]:
        """Every partition the group has committed an offset for or has assigned to a member now: the
        committed offset, the partition's latest offset (its end), the lag, and the member holding it.
        `description`: the group's `describe_group`, if the caller has it already."""
        committed = self.committed_offsets(group)
        description = description or self.describe_group(group)
        owners = {tp: m.member_id for m in description.members for tp in m.assignment}
        topics = sorted({tp.topic for tp in committed} | {tp.topic for tp in owners})
        if topics:
            self.cluster.refresh(topics, allow_auto_create=False)  # one Metadata request for them all
        latest: dict[str, dict[int, int] | None] = {}
        for topic in topics:
            try:
                ends = self.offsets(topic, LATEST, offline=-1, read_committed=True)
                latest[topic] = {p: end for p, end in ends.items() if end >= 0}  # none for a partition offline
            except UnknownTopicOrPartition:
                latest[topic] = None  # deleted since the commit
        out = {}
        for tp in sorted(set(committed) | set(owners)):
            ends = latest.get(tp.topic)
            end = None if ends is None else ends.get(tp.partition)
            done = committed.get(tp)
            lag = None if done is None or end is None else max(0, end - done)
            out[tp] = GroupOffset(done, end, lag, owners.get(tp))
        return out

    def delete_groups(self, groups: list[str]) -> None:
        """Delete empty groups and their committed offsets, each at its coordinator (NonEmptyGroup while it
        has members, GroupIdNotFound if unknown: the first error is raised after every group was tried)."""
        errors = []
        for group in groups:
            body = self._request(self._coordinator(group), delete_groups.API_KEY, 1,
                                 delete_groups.REQUEST(groups_names=[group]))
            errors += [(r.error_code, f"group {r.group_id!r}") for r in body.results]
        self._raise_first(errors)

    def delete_group_offsets(self, group: str, partitions: list[TopicPartition]) -> None:
        """Delete a group's committed offsets of these partitions (GroupSubscribedToTopic for a topic its
        members consume now)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = self._request(self._coordinator(group), offset_delete.API_KEY, 0, offset_delete.REQUEST(
            group_id=group, topics=[{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                                    for t, ps in by_topic.items()]))
        if body.error_code:
            raise error_for_code(body.error_code, f"OffsetDelete {group!r}")
        self._raise_first((p.error_code, f"{t.name}-{p.partition_index}") for t in body.topics for p in t.partitions)

    def alter_group_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit these offsets for a group that has no members now (UnknownMemberId while it has: Kafka's
        rule, which keeps a reset from racing live consumers)."""
        by_topic: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": ""})
        body = self._request(self._coordinator(group), offset_commit.API_KEY, 7, offset_commit.REQUEST(
            group_id=group, generation_id=-1, member_id="", group_instance_id=None,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]))
        self._raise_first((p.error_code, f"group {group!r} {t.name}-{p.partition_index}")
                          for t in body.topics for p in t.partitions)

    def _coordinator(self, group: str) -> int:
        """The node id of the group's coordinator."""
        body = self._request(self._controller(), find_coordinator.API_KEY, 2, find_coordinator.REQUEST(
            key=group, key_type=0))
        if body.error_code:
            raise error_for_code(body.error_code, f"FindCoordinator {group!r}: {body.error_message or ''}".rstrip(": "))
        if body.node_id not in self.cluster.brokers:
            self.cluster.refresh([])
        return body.node_id


def _description(g) -> GroupDescription:
    """A DescribeGroups answer's group, its consumer members' subscriptions and assignments decoded."""
    members = []
    for m in g.members:
        member = MemberDescription(m.member_id, m.client_id, m.client_host, m.group_instance_id)
        if g.protocol_type == cp.PROTOCOL_TYPE:
            try:
                if len(m.member_metadata):
                    member.topics = list(cp.decode_subscription(m.member_metadata).topics)
                member.assignment = sorted(cp.decode_assignment(m.member_assignment).partitions)
            except ProtocolError:
                pass  # a member that is not a Kafka-protocol consumer after all: show it without them
        members.append(member)
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)
