"""Admin: create, delete, list and describe topics, look up partition offsets, and inspect consumer groups.

Topic changes go to the controller (any broker answers when there is one); offset
look-ups (ListOffsets) go to each partition's leader; group questions
(DescribeGroups, OffsetFetch) go to the group's coordinator, found with
FindCoordinator, and ListGroups to every broker; ACLs (CreateAcls, DescribeAcls,
DeleteAcls) to any broker. Errors come back as the typed exceptions of
`mmlog.errors`, carrying their Kafka error code.
"""

from __future__ import annotations

import contextlib
import time
import os
from dataclasses import dataclass, field

from mmlog.security.client import ClientSecurity
from mmlog.client import consumer_protocol as cp
from mmlog.client.cluster import Cluster
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.client.records import TopicPartition
from mmlog.config import throttled_replicas
from mmlog.errors import KafkaError, LeaderNotAvailable, NotController, UnknownTopicOrPartition, error_for_code
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import (alter_client_quotas, alter_user_scram_credentials, describe_client_quotas,
                                     describe_user_scram_credentials)
from mmlog.protocol.messages import (create_partitions, create_topics, delete_groups, delete_records, delete_topics,
                                     describe_configs, describe_groups, find_coordinator, incremental_alter_configs,
                                     list_groups, list_offsets, offset_commit, offset_delete, offset_fetch)
from mmlog.protocol.messages import alter_partition_reassignments, elect_leaders, list_partition_reassignments
from mmlog.protocol.messages import create_acls, delete_acls, describe_acls
from mmlog.security import acls, scram

LATEST, EARLIEST = -1, -2
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SCRAM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # AlterUserScramCredentials mechanism codes


def _entity_text(entity) -> str:
    """A quota entity as `mmlog quotas` prints it: user=alice,client-id=<default>."""
    return ",".join(f"{e.entity_type}={'<default>' if e.entity_name is None else e.entity_name}" for e in entity)


@dataclass
class PartitionDescription:
    partition: int
    leader: int
    earliest: int
    latest: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    config: dict[str, str] = field(default_factory=dict)
    overrides: set[str] = field(default_factory=set)  # config names set on the topic (not defaults)


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


@dataclass(frozen=True)
class Reassignment:
    """A partition reassignment in progress: the replicas now (old and new), those being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


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


class Admin:
    """Topic administration and offset look-ups against a cluster."""

    def __init__(self, bootstrap: str = "127.0.0.1:9092", *, client_id: str = "mmlog-admin",
                 timeout: float = 30.0, **security) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, timeout=timeout,
                               security=ClientSecurity.from_options(**security))
        self.timeout = timeout
        self._conns: dict[int, BrokerConnection] = {}

    # ------------------------------------------------------------ topics

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     replication_factor: int = -1) -> None:
        """Create one topic (TopicAlreadyExists, InvalidTopic, InvalidConfig, ... on failure)."""
        self.create_topics({name: (partitions, config or {})}, replication_factor)

    def create_topics(self, topics: dict[str, tuple[int, dict[str, str]]], replication_factor: int = -1) -> None:
        body = self._request(self._controller(), create_topics.API_KEY, 4, create_topics.REQUEST(
            timeout_ms=int(self.timeout * 1000), validate_only=False, topics=[
                {"name": name, "num_partitions": n, "replication_factor": replication_factor, "assignments": [],
                 "configs": [{"name": k, "value": str(v)} for k, v in cfg.items()]}
                for name, (n, cfg) in topics.items()]))
        self._raise_first((t.error_code, f"{t.name}: {t.error_message or ''}".rstrip(": ")) for t in body.topics)

    def delete_topic(self, name: str) -> None:
        self.delete_topics([name])

    def delete_topics(self, names: list[str]) -> None:
        body = self._request(self._controller(), delete_topics.API_KEY, 3, delete_topics.REQUEST(
            topic_names=list(names), timeout_ms=int(self.timeout * 1000)))
        self._raise_first((r.error_code, r.name) for r in body.responses)

    def create_partitions(self, counts: dict[str, int], validate_only: bool = False) -> None:
        """Grow topics to new partition counts (InvalidPartitions if a count does not grow; with validate_only
        only checked). Keys map to other partitions afterwards: murmur2(key) % the new count."""
        body = self._request(self._controller(), create_partitions.API_KEY, 1, create_partitions.REQUEST(
            timeout_ms=int(self.timeout * 1000), validate_only=validate_only, topics=[
                {"name": name, "count": count, "assignments": None} for name, count in counts.items()]))
        self._raise_first((r.error_code, f"{r.name}: {r.error_message or ''}".rstrip(": ")) for r in body.results)

    def alter_topic_config(self, name: str, set: dict[str, str] | None = None, delete: list[str] = (),
                           validate_only: bool = False) -> None:
        """Set and delete (back to the default) topic config overrides (IncrementalAlterConfigs); running
        partitions take them without a restart. InvalidConfig for an unknown name or a bad value."""
        configs = [{"name": k, "config_operation": 0, "value": str(v)} for k, v in (set or {}).items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = self._request(self._controller(), incremental_alter_configs.API_KEY, 0,
                             incremental_alter_configs.REQUEST(validate_only=validate_only, resources=[
                                 {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": configs}]))
        self._raise_first((r.error_code, f"{r.resource_name}: {r.error_message or ''}".rstrip(": "))
                          for r in body.responses)

    # ------------------------------------------------------------ dynamic broker configs and client quotas

    def alter_broker_config(self, broker: int | None, set: dict[str, str] | None = None, delete: list[str] = (),
                            validate_only: bool = False) -> None:
        """Set and delete dynamic configs of one broker (its id) or, with None, the cluster-wide default
        (IncrementalAlterConfigs); InvalidConfig for a setting that only takes effect at start."""
        node = self._controller() if broker is None else broker
        if broker is not None and broker not in self.cluster.brokers:
            self.cluster.refresh([])
        configs = [{"name": k, "config_operation": 0, "value": str(v)} for k, v in (set or {}).items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = self._request(node, incremental_alter_configs.API_KEY, 0,
                             incremental_alter_configs.REQUEST(validate_only=validate_only, resources=[
                                 {"resource_type": BROKER_RESOURCE, "resource_name": "" if broker is None else
                                  str(broker), "configs": configs}]))
        self._raise_first((r.error_code, f"broker {r.resource_name or '<default>'}: {r.error_message or ''}")
                          for r in body.responses)

    def broker_config(self, broker: int) -> dict[str, tuple[str | None, int]]:
        """A broker's settings: name -> (value, Kafka config_source: 2 dynamic, 3 dynamic default, 4 static,
        5 default)."""
        if broker not in self.cluster.brokers:
            self.cluster.refresh([])
        body = self._request(broker, describe_configs.API_KEY, 1, describe_configs.REQUEST(
            resources=[{"resource_type": BROKER_RESOURCE, "resource_name": str(broker), "configuration_keys": None}]))
        [result] = body.results
        if result.error_code:
            raise error_for_code(result.error_code, result.error_message or str(broker))
        return {c.name: (c.value, c.config_source) for c in result.configs}

    def alter_client_quotas(self, changes: dict[tuple, dict[str, float | None]], validate_only: bool = False) -> None:
        """Set (a number) or remove (None) quotas: {entity: {key: value}}, an entity being a tuple of
        (type, name) pairs, type "user" or "client-id", name None for `<default>`; keys producer_byte_rate,
        consumer_byte_rate (bytes/s) and request_percentage. InvalidRequest for a bad entity, key or value."""
        body = self._request(self._controller(), alter_client_quotas.API_KEY, 0, alter_client_quotas.REQUEST(
            validate_only=validate_only, entries=[
                {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                 "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                         for k, v in ops.items()]}
                for entity, ops in changes.items()]))
        self._raise_first((e.error_code, f"{_entity_text(e.entity)}: {e.error_message or ''}") for e in body.entries)

    def describe_client_quotas(self, filters: list[tuple[str, int, str | None]] = (),
                               strict: bool = False) -> dict[tuple, dict[str, float]]:
        """The quotas set: {entity: {key: value}}; filters are (type, match type 0 exact / 1 default / 2 any,
        name), as DescribeClientQuotas takes them (none: every entity)."""
        body = self._request(self._controller(), describe_client_quotas.API_KEY, 0, describe_client_quotas.REQUEST(
            strict=strict, components=[{"entity_type": t, "match_type": m, "match": n} for t, m, n in filters]))
        if body.error_code:
            raise error_for_code(body.error_code, body.error_message or "DescribeClientQuotas")
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in body.entries or []}

    def list_topics(self) -> dict[str, int]:
        """Every topic and its partition count."""
        self.cluster.refresh(None)
        return {name: info.partitions for name, info in sorted(self.cluster.topics.items()) if info.error == 0}

    def describe_topic(self, name: str) -> TopicDescription:
        """Partitions (leader, earliest and latest offsets) and the effective config of a topic."""
        self.cluster.refresh([name], allow_auto_create=False)
        info = self.cluster.topic(name, allow_auto_create=False, wait=0)
        earliest = self.offsets(name, EARLIEST, offline=-1)
        latest = self.offsets(name, LATEST, offline=-1)
        parts = [PartitionDescription(p, info.leaders[p], earliest[p], latest[p],
                                      info.replicas[p] if info.replicas else (), info.isr[p] if info.isr else ())
                 for p in range(info.partitions)]
        config, overrides = self.topic_config(name)
        return TopicDescription(name, parts, config, overrides)

    def topic_config(self, name: str) -> tuple[dict[str, str], set[str]]:
        """(effective config, names overridden on the topic), Kafka names."""
        body = self._request(self._controller(), describe_configs.API_KEY, 1, describe_configs.REQUEST(
            resources=[{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}]))
        [result] = body.results
        if result.error_code:
            raise error_for_code(result.error_code, result.error_message or name)
        config = {c.name: c.value for c in result.configs}
        overrides = {c.name for c in result.configs if c.config_source == 1}
        return config, overrides

    # ------------------------------------------------------------ offsets

    def offsets(self, topic: str, timestamp: int = LATEST, *, offline: int | None = None,
                read_committed: bool = False) -> dict[int, int]:
        """Per partition: latest (-1), earliest (-2), or the first offset at/after a timestamp (ms; -1 if none).
        Latest is the high watermark, or with read_committed the last stable offset.

        A partition whose broker is down raises LeaderNotAvailable, or gets `offline` if one is given.
        """
        info = self.cluster.topic(topic, allow_auto_create=False)
        by_leader: dict[int, list[int]] = {}
        out = {}
        for p, leader in enumerate(info.leaders):
            if leader in self.cluster.brokers:
                by_leader.setdefault(leader, []).append(p)
            elif offline is None:
                raise LeaderNotAvailable(f"{topic}-{p} has no live leader")
            else:
                out[p] = offline
        for leader, parts in by_leader.items():
            body = self._request(leader, list_offsets.API_KEY, 5, list_offsets.REQUEST(
                replica_id=-1, isolation_level=int(read_committed), topics=[{"name": topic, "partitions": [
                    {"partition_index": p, "timestamp": timestamp} for p in parts]}]))
            for part in body.topics[0].partitions:
                if part.error_code:
                    raise error_for_code(part.error_code, f"{topic}-{part.partition_index}")
                out[part.partition_index] = part.offset
        return dict(sorted(out.items()))

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int]:
        """Delete the records of partitions below an offset each (-1: the high watermark), on their leaders;
        returns each partition's low watermark (its new log start on every live replica). The typed error of
        the first partition refused (OffsetOutOfRange past the high watermark, RequestTimedOut while
        followers lag...) is raised after every leader has answered."""
        info = self.cluster.topic(topic, allow_auto_create=False)
        by_leader: dict[int, list[int]] = {}
        for p in before:
            if not 0 <= p < info.partitions:
                raise UnknownTopicOrPartition(f"{topic} has no partition {p}")
            leader = info.leaders[p]
            if leader not in self.cluster.brokers:
                raise LeaderNotAvailable(f"{topic}-{p} has no live leader")
            by_leader.setdefault(leader, []).append(p)
        out, errors = {}, []
        for leader, parts in sorted(by_leader.items()):
            body = self._request(leader, delete_records.API_KEY, 1, delete_records.REQUEST(
                timeout_ms=int(self.timeout * 1000), topics=[{"name": topic, "partitions": [
                    {"partition_index": p, "offset": before[p]} for p in parts]}]))
            for part in body.topics[0].partitions:
                if part.error_code:
                    errors.append((part.error_code, f"{topic}-{part.partition_index}"))
                else:
                    out[part.partition_index] = part.low_watermark
        self._raise_first(errors)
        return dict(sorted(out.items()))

    def earliest_offsets(self, topic: str) -> dict[int, int]:
        return self.offsets(topic, EARLIEST)

    def latest_offsets(self, topic: str) -> dict[int, int]:
        return self.offsets(topic, LATEST)

    def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[int, int]:
        return self.offsets(topic, timestamp_ms)

    # ------------------------------------------------------------ consumer groups

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
        body = self._request(self._coordinator(group), describe_groups.API_KEY, 4, describe_groups.REQUEST(
            groups=[group], include_authorized_operations=False))
        [g] = body.groups
        if g.error_code:
            raise error_for_code(g.error_code, f"DescribeGroups {group!r}")
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

    def group_offsets(self, group: str,
                      description: GroupDescription | None = None) -> dict[TopicPartition, GroupOffset]:
        """Every partition the group has committed an offset for or has assigned to a member now: the
        committed offset, the partition's latest offset (its end), the lag, and the member holding it.
        `description`: the group's `describe_group`, if the caller has it already."""
        body = self._request(self._coordinator(group), offset_fetch.API_KEY, 5, offset_fetch.REQUEST(
            group_id=group, topics=None))
        if body.error_code:
            raise error_for_code(body.error_code, f"OffsetFetch {group!r}")
        committed = {TopicPartition(t.name, p.partition_index): p.committed_offset
                     for t in body.topics for p in t.partitions if p.committed_offset >= 0}
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

    # ------------------------------------------------------------ replicas (the controller's)

    def elect_leaders(self, election_type: str = "preferred",
                      partitions: list[TopicPartition] | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Preferred or unclean leader elections (None: every partition); per partition None when elected, or
        its error (ElectionNotNeeded, PreferredLeaderNotAvailable, EligibleLeadersNotAvailable, ...)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = elect_leaders.REQUEST(election_type=ELECTION_TYPES[election_type], timeout_ms=int(self.timeout * 1000),
                                        topic_partitions=None if partitions is None else [
                                            {"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        body = self._to_controller(elect_leaders.API_KEY, 1, request, lambda b: any(
            r.error_code == NotController.code for t in b.replica_election_results for r in t.partition_result))
        return {TopicPartition(t.topic, r.partition_id): error_for_code(r.error_code, r.error_message or "")
                if r.error_code else None for t in body.replica_election_results for r in t.partition_result}

    def alter_partition_reassignments(self, targets: dict[TopicPartition, list[int] | None]) -> None:
        """Move partitions to new replicas (None cancels a partition's move); the controller carries them
        through in the background (`list_partition_reassignments` shows progress). Raises the first
        partition's error: InvalidReplicaAssignment, UnknownTopicOrPartition, NoReassignmentInProgress."""
        by_topic: dict[str, list] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)})
        body = self._to_controller(alter_partition_reassignments.API_KEY, 0, alter_partition_reassignments.REQUEST(
            timeout_ms=int(self.timeout * 1000), topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]),
            lambda b: b.error_code == NotController.code)
        self._raise_first([(body.error_code, body.error_message or "")] + [
            (r.error_code, f"{t.name}-{r.partition_index}: {r.error_message or ''}".rstrip(": "))
            for t in body.responses for r in t.partitions])

    def list_partition_reassignments(self, partitions: list[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, Reassignment]:
        """The reassignments in progress (of `partitions`, or all)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = self._to_controller(list_partition_reassignments.API_KEY, 0, list_partition_reassignments.REQUEST(
            timeout_ms=int(self.timeout * 1000), topics=None if partitions is None else [
                {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]),
            lambda b: b.error_code == NotController.code)
        self._raise_first([(body.error_code, body.error_message or "")])
        return {TopicPartition(t.name, r.partition_index): Reassignment(
            tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas))
            for t in body.topics for r in t.partitions}

    def set_replication_throttle(self, rate: int | None) -> None:
        """leader.replication.throttled.rate and follower.replication.throttled.rate of every broker (bytes/s;
        None removes them): the cluster-wide default's dynamic configs, as kafka-reassign-partitions.sh sets
        each broker's. They bound the replicas the topics' *.replication.throttled.replicas name
        (`throttle_moves`)."""
        names = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"]
        self.alter_broker_config(None, set={n: rate for n in names} if rate is not None else None,
                                 delete=names if rate is None else ())

    def throttle_moves(self, moves: dict[TopicPartition, tuple[list[int], list[int]]]) -> None:
        """Name the replicas of partition moves ({partition: (current replicas, target replicas)}) in their
        topics' throttled-replicas configs, as kafka-reassign-partitions.sh does: the leader side throttles
        the current replicas (whichever leads), the follower side the replicas the move adds."""
        by_topic: dict[str, tuple[dict, dict]] = {}
        for tp, (current, target) in moves.items():
            leader, follower = by_topic.setdefault(tp.topic, ({}, {}))
            leader[tp.partition] = list(current)
            follower[tp.partition] = [b for b in target if b not in current]
        for topic, (leader, follower) in sorted(by_topic.items()):
            self.alter_topic_config(topic, set={throttled_replicas.LEADER: throttled_replicas.pairs(leader),
                                                throttled_replicas.FOLLOWER: throttled_replicas.pairs(follower)})

    def clear_throttled_replicas(self, topics) -> None:
        """Remove the throttled-replicas configs of these topics (the moves are done)."""
        for topic in sorted(set(topics)):
            self.alter_topic_config(topic, delete=[throttled_replicas.LEADER, throttled_replicas.FOLLOWER])

    def _to_controller(self, api_key: int, version: int, request, not_controller, attempts: int = 10):
        """A request only the controller answers: sent to the one Metadata names, again after a refresh
        while the answer is NOT_CONTROLLER (a controller change under way)."""
        for _ in range(attempts - 1):
            body = self._request(self._controller(), api_key, version, request)
            if not not_controller(body):
                return body
            time.sleep(0.2)
            self.cluster.refresh([])
        return self._request(self._controller(), api_key, version, request)

    # ------------------------------------------------------------ SCRAM users

    def set_user_password(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                          iterations: int = scram.MIN_ITERATIONS) -> None:
        """Create or replace a user's SCRAM credential: salted here, so the password never leaves the client."""
        salt = os.urandom(32)
        salted = scram.salted_password(mechanism, password, salt, iterations)
        self._alter_users([], [{"name": user, "mechanism": SCRAM_CODES[mechanism], "iterations": iterations,
                                "salt": salt, "salted_password": salted}])

    def delete_user(self, user: str, mechanism: str = "SCRAM-SHA-512") -> None:
        self._alter_users([{"name": user, "mechanism": SCRAM_CODES[mechanism]}], [])

    def describe_users(self, users: list[str] | None = None) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations} (all users when None); ResourceNotFound for a named unknown user."""
        body = self._request(self._controller(), describe_user_scram_credentials.API_KEY, 0,
                             describe_user_scram_credentials.REQUEST(
                                 users=None if users is None else [{"name": u} for u in users]))
        self._raise_first([(body.error_code, body.error_message or "")])
        self._raise_first((r.error_code, f"{r.user}: {r.error_message or ''}") for r in body.results)
        names = {code: name for name, code in SCRAM_CODES.items()}
        return {r.user: {names[i.mechanism]: i.iterations for i in r.credential_infos} for r in body.results}

    def _alter_users(self, deletions: list, upsertions: list) -> None:
        body = self._request(self._controller(), alter_user_scram_credentials.API_KEY, 0,
                             alter_user_scram_credentials.REQUEST(deletions=deletions, upsertions=upsertions))
        self._raise_first((r.error_code, f"{r.user}: {r.error_message or ''}") for r in body.results)

    # ------------------------------------------------------------ ACLs

    def create_acls(self, bindings: list[acls.Binding]) -> None:
        """Add ACL bindings (security/acls.py's Binding, wire codes); the first refusal is raised."""
        body = self._request(self._controller(), create_acls.API_KEY, 1, create_acls.REQUEST(creations=[
            {"resource_type": b.resource_type, "resource_name": b.name, "resource_pattern_type": b.pattern_type,
             "principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission}
            for b in bindings]))
        self._raise_first((r.error_code, r.error_message or "") for r in body.results)

    def describe_acls(self, flt: acls.Filter) -> list[acls.Binding]:
        """The bindings that match a filter."""
        body = self._request(self._controller(), describe_acls.API_KEY, 1, describe_acls.REQUEST(
            **_filter_fields(flt)))
        self._raise_first([(body.error_code, body.error_message or "")])
        return [acls.Binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                             a.permission_type) for r in body.resources for a in r.acls]

    def delete_acls(self, filters: list[acls.Filter]) -> list[list[acls.Binding]]:
        """Remove the bindings matching each filter; per filter, the bindings removed."""
        body = self._request(self._controller(), delete_acls.API_KEY, 1, delete_acls.REQUEST(
            filters=[_filter_fields(f) for f in filters]))
        self._raise_first((r.error_code, r.error_message or "") for r in body.filter_results)
        return [[acls.Binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                              m.permission_type) for m in r.matching_acls] for r in body.filter_results]

    def _coordinator(self, group: str) -> int:
        """The node id of the group's coordinator."""
        body = self._request(self._controller(), find_coordinator.API_KEY, 2, find_coordinator.REQUEST(
            key=group, key_type=0))
        if body.error_code:
            raise error_for_code(body.error_code, f"FindCoordinator {group!r}: {body.error_message or ''}".rstrip(": "))
        if body.node_id not in self.cluster.brokers:
            self.cluster.refresh([])
        return body.node_id

    # ------------------------------------------------------------ plumbing

    def _controller(self) -> int:
        """The controller's node id, or any live broker's (every broker answers topic admin)."""
        if not self.cluster.brokers:
            self.cluster.refresh([])
        if self.cluster.controller_id in self.cluster.brokers:
            return self.cluster.controller_id
        return self.cluster.any_broker().node_id

    def _request(self, node_id: int, api_key: int, version: int, body):
        """One request to a broker; if its connection fails, forget it and refresh metadata before raising."""
        try:
            return self._conn(node_id).request(api_key, version, body)
        except (ConnectionClosed, OSError):
            conn = self._conns.pop(node_id, None)
            if conn is not None:
                conn.close()
            with contextlib.suppress(ConnectionClosed):  # no broker answers either: raise the first failure
                self.cluster.refresh([], timeout=1.0)
            raise

    def _conn(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is None:
            broker = self.cluster.brokers[node_id]
            conn = self._conns[node_id] = BrokerConnection(broker.host, broker.port, client_id=self.cluster.client_id,
                                                           timeout=self.timeout, security=self.cluster.security)
        return conn

    @staticmethod
    def _raise_first(results) -> None:
        for code, what in results:
            if code:
                raise error_for_code(code, what)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _filter_fields(f: acls.Filter) -> dict:
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
            "operation": f.operation, "permission_type": f.permission}
