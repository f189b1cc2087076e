"""A broker with fast group timers, and a raw-protocol group member for the coordinator tests."""

from __future__ import annotations

import functools

import pytest

from mmlog.protocol.messages import (describe_groups, heartbeat, join_group, leave_group, list_groups, metadata,
                                     offset_commit, offset_fetch, sync_group)
from mmlog.testing import EmbeddedBroker, connections

# Fast timers: the first rebalance waits 200 ms for more members; sessions may be as short as 300 ms.
FAST_GROUPS = {"group.initial.rebalance.delay.ms": 200, "group.min.session.timeout.ms": 300}

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE = 0, 3, 12
ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID = 22, 23, 24, 25
INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 26, 27, 79, 82


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config=FAST_GROUPS) as b:
        yield b


connect = functools.partial(connections.connect, timeout=15, client_id="raw-test")


def create_topic(broker, name: str, partitions: int = 1) -> None:
    with connect(broker) as conn:
        conn.request(19, 4, topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1}],
                     timeout_ms=10_000)
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": name}]))


class RawMember:
    """A group member speaking the protocol by hand over its own connection.

    `send_join` / `receive_join` split a JoinGroup so that several members can wait for one
    rebalance at once; `join` does both (and answers MEMBER_ID_REQUIRED as clients do).
    """

    def __init__(self, broker, group: str, *, session_ms: int = 10_000, rebalance_ms: int = 10_000,
                 instance: str | None = None, protocols=(("range", b"meta"),), protocol_type: str = "consumer",
                 version: int = 5) -> None:
        self.broker, self.group = broker, group
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.instance = instance
        self.protocols = [{"name": n, "metadata": m} for n, m in protocols]
        self.protocol_type = protocol_type
        self.version = version
        self.member_id = ""
        self.generation = -1
        self.conn = connect(broker)

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = connect(self.broker)

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------ JoinGroup

    def join_request(self):
        return join_group.REQUEST(
            group_id=self.group, session_timeout_ms=self.session_ms, rebalance_timeout_ms=self.rebalance_ms,
            member_id=self.member_id, group_instance_id=self.instance, protocol_type=self.protocol_type,
            protocols=self.protocols)

    def try_join(self):
        """One JoinGroup round trip, whatever it answers (for requests that are refused)."""
        return self.conn.request(join_group.API_KEY, self.version, self.join_request())

    def send_join(self) -> None:
        """Send a JoinGroup that parks in the coordinator (after fetching a member id if v4+ needs one)."""
        if not self.member_id and self.instance is None and self.version >= 4:
            r = self.conn.request(join_group.API_KEY, self.version, self.join_request())
            assert r.error_code == MEMBER_ID_REQUIRED, r
            self.member_id = r.member_id
        self.conn.send(join_group.API_KEY, self.version, self.join_request())

    def receive_join(self):
        r = self.conn.receive()
        if r.error_code == NONE:
            self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def join(self):
        self.send_join()
        return self.receive_join()

    # ------------------------------------------------------------ the rest

    def send_sync(self, assignments=None) -> None:
        self.conn.send(sync_group.API_KEY, min(self.version, 3), sync_group.REQUEST(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance,
            assignments=[{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]))

    def sync(self, assignments=None):
        self.send_sync(assignments)
        return self.conn.receive()

    def heartbeat(self, generation: int | None = None) -> int:
        return self.conn.request(heartbeat.API_KEY, min(self.version, 3), heartbeat.REQUEST(
            group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id, group_instance_id=self.instance)).error_code

    def leave(self) -> int:
        if self.version >= 3:
            r = self.conn.request(leave_group.API_KEY, 3, leave_group.REQUEST(
                group_id=self.group, members=[{"member_id": self.member_id, "group_instance_id": self.instance}]))
            return r.error_code or r.members[0].error_code
        return self.conn.request(leave_group.API_KEY, self.version, leave_group.REQUEST(
            group_id=self.group, member_id=self.member_id)).error_code

    def commit(self, offsets: dict, generation: int | None = None, member_id: str | None = None,
               version: int = 7) -> dict:
        """offsets: {(topic, partition): offset or (offset, leader_epoch, metadata)} -> {(topic, partition): code}."""
        return commit(self.conn, self.group, offsets, self.generation if generation is None else generation,
                      self.member_id if member_id is None else member_id, version, self.instance)


def commit(conn, group: str, offsets: dict, generation: int = -1, member_id: str = "", version: int = 7,
           instance: str | None = None) -> dict:
    topics: dict[str, list] = {}
    for (topic, partition), value in offsets.items():
        offset, epoch, meta = value if isinstance(value, tuple) else (value, -1, None)
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": epoch, "committed_metadata": meta})
    r = conn.request(offset_commit.API_KEY, version, offset_commit.REQUEST(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch_offsets(conn, group: str, partitions: dict | None = None, version: int = 5):
    """partitions: {topic: [partition, ...]} or None for all -> (top-level error, {(topic, p): partition data})."""
    topics = None if partitions is None else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
    r = conn.request(offset_fetch.API_KEY, version, offset_fetch.REQUEST(group_id=group, topics=topics))
    return r.error_code, {(t.name, p.partition_index): p for t in r.topics for p in t.partitions}


def committed(conn, group: str, partitions: dict | None = None) -> dict:
    """{(topic, partition): committed offset} (offset -1: nothing committed)."""
    return {k: p.committed_offset for k, p in fetch_offsets(conn, group, partitions)[1].items()}


def describe(conn, group: str):
    return conn.request(describe_groups.API_KEY, 4, groups=[group]).groups[0]


def list_all(conn) -> dict:
    return {g.group_id: g.protocol_type for g in conn.request(list_groups.API_KEY, 2).groups}
