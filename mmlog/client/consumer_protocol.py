"""Kafka's ConsumerProtocol: what consumer-group members put in JoinGroup metadata and SyncGroup assignments.

The coordinator treats a member's metadata and assignment as opaque bytes; only
the members read them. Every consumer of protocol type "consumer" (Java's,
librdkafka's, kafka-python's, mmlog's) writes them in this format, which is what
lets them share one group. Kafka's schemas are
`ConsumerProtocolSubscription.json` and `ConsumerProtocolAssignment.json`
(versions 0-3, never flexible); the bytes are an int16 version followed by the
body of that version:

    Subscription   version int16
                   topics [string]
                   user_data nullable bytes
                   owned_partitions [topic string, partitions [int32]]   v1+
                   generation_id int32                                   v2+
                   rack_id nullable string                               v3+

    Assignment     version int16
                   assigned_partitions [topic string, partitions [int32]]
                   user_data nullable bytes

Kafka's rule for versions it does not know: read them as the newest version it
does (fields are only ever appended), so a v4 written by a newer client still
decodes. mmlog writes v0 of both, as the eager assignors (range, roundrobin) of
every client do, with a null user_data as Java writes it.

Sans-IO: bytes in, dataclasses out, and back; the bodies go through the same
schema codec as the wire protocol (`mmlog.protocol.schema`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mmlog.client.records import TopicPartition
from mmlog.protocol import ProtocolError
from mmlog.protocol.schema import Field, Message

PROTOCOL_TYPE = "consumer"
LATEST_VERSION = 3
WRITE_VERSION = 0
_VERSION = struct.Struct(">h")

_SUBSCRIPTION = Message("ConsumerProtocolSubscription", -1, "0-3", "none", [
    Field("topics", "[]string", "0+"),
    Field("user_data", "bytes", "0+", nullable="0+", default=None),
    Field("owned_partitions", "[]TopicPartition", "1+", fields=[
        Field("topic", "string", "1+"),
        Field("partitions", "[]int32", "1+"),
    ]),
    Field("generation_id", "int32", "2+", default=-1),
    Field("rack_id", "string", "3+", nullable="3+", default=None),
])

_ASSIGNMENT = Message("ConsumerProtocolAssignment", -1, "0-3", "none", [
    Field("assigned_partitions", "[]TopicPartition", "0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
    Field("user_data", "bytes", "0+", nullable="0+", default=None),
])


@dataclass(frozen=True)
class Subscription:
    """A member's JoinGroup metadata: the topics it wants (and, from v1, what it owns)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = WRITE_VERSION


@dataclass(frozen=True)
class Assignment:
    """A member's share of a generation, as the leader's SyncGroup hands it out."""

    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None
    version: int = WRITE_VERSION


def encode_subscription(sub: Subscription) -> bytes:
    body = _SUBSCRIPTION(topics=list(sub.topics), user_data=sub.user_data,
                         owned_partitions=_grouped(sub.owned_partitions), generation_id=sub.generation_id,
                         rack_id=sub.rack_id)
    return _encode(_SUBSCRIPTION, sub.version, body)


def decode_subscription(data) -> Subscription:
    version, body = _decode(_SUBSCRIPTION, data, "subscription")
    return Subscription(tuple(body.topics), _bytes(body.user_data), _flat(body.owned_partitions),
                        body.generation_id, body.rack_id, version)


def encode_assignment(assignment: Assignment) -> bytes:
    body = _ASSIGNMENT(assigned_partitions=_grouped(assignment.partitions), user_data=assignment.user_data)
    return _encode(_ASSIGNMENT, assignment.version, body)


def decode_assignment(data) -> Assignment:
    """An empty byte string is an empty assignment (what the coordinator hands a member the leader left out)."""
    if len(data) == 0:
        return Assignment()
    version, body = _decode(_ASSIGNMENT, data, "assignment")
    return Assignment(_flat(body.assigned_partitions), _bytes(body.user_data), version)


def _encode(message: Message, version: int, body) -> bytes:
    if not 0 <= version <= LATEST_VERSION:
        raise ValueError(f"{message.name} version {version} is not 0-{LATEST_VERSION}")
    out = bytearray(_VERSION.pack(version))
    message.encode(body, version, out)
    return bytes(out)


def _decode(message: Message, data, what: str):
    view = memoryview(data).cast("B")
    if len(view) < 2:
        raise ProtocolError(f"consumer protocol {what} of {len(view)} bytes has no version")
    (version,) = _VERSION.unpack_from(view)
    if version < 0:
        raise ProtocolError(f"consumer protocol {what} has version {version}")
    try:
        return version, message.decode(view, min(version, LATEST_VERSION), 2)
    except (ProtocolError, IndexError, ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"bad consumer protocol {what} (version {version}): {exc}") from None


def _grouped(partitions) -> list[dict]:
    """TopicPartitions -> [{topic, partitions}] by topic (sorted, as Java's serializer orders them)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()]


def _flat(entries) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(e.topic, p) for e in entries for p in e.partitions)


def _bytes(value) -> bytes | None:
    return None if value is None else bytes(value)
