"""Metadata (3): live brokers, the controller, the topics asked for and their partition leaders.

A null topic list (v1+) or an empty one in v0 means every topic; an empty list in
v1+ means brokers only. Unknown topics are created through the control plane when
`auto.create.topics.enable` is on and the client allows it (v4+), and answered once
they exist; at most `auto.create.topics.max.per.request` of them are sent there, and
those past it or past the control plane's per-second budget answer
LEADER_NOT_AVAILABLE (Kafka's answer for a topic being created): clients ask again. Leader epochs are reported as -1, which keeps clients from validating
positions with OffsetForLeaderEpoch.

Brokers, the controller and, in cluster mode, each partition's leader and ISR come
from the cluster view (`ipc/cluster_view.py`); replicas from the topic catalogue.
A partition without a live leader answers LEADER_NOT_AVAILABLE with leader -1,
its dead replicas in offline_replicas, and clients ask again later. Standalone,
every partition is led here alone.

A partition whose replica here is on an offline log dir (`mmlog/log/log_dirs.py`)
lists this broker in offline_replicas and not in the ISR; if this broker leads it,
it answers KAFKA_STORAGE_ERROR with leader -1 (Kafka's controller would take the
leadership away and answer LEADER_NOT_AVAILABLE; both are retriable for clients).

Authorisation (with an authoriser, Kafka's rules): asked for every topic, the answer
leaves out those the principal may not DESCRIBE; asked by name, they answer
TOPIC_AUTHORIZATION_FAILED, and so does an unknown topic it may not auto-create
(CREATE on the cluster or on the topic).

An existing topic's entry (error code, name, id, partitions) is encoded once per version and
reused until something it is made from changes (`processors/metadata_cache.py`): an all-topics
request over 10,000 partitions costs a processor 73-78 ms of CPU when every entry is built and
encoded, 0.4 ms reused (docs/benchmarks.md). Which topics are answered, and how
(authorisation, creation, by id), is decided per request.

v10+ answers each topic's id (the UUID stored with the topic in its catalogue entry; the
zero UUID for a topic that does not exist). v12 may ask by topic id (a null name): as in
Kafka, the ids then decide (names are ignored), an unknown id answers UNKNOWN_TOPIC_ID and
nothing is created; v10-11 may not (INVALID_REQUEST).
"""

from __future__ import annotations

import base64
import uuid

from mmlog.errors import (InvalidRequest, KafkaStorageError, LeaderNotAvailable, TopicAuthorizationFailed,
                          UnknownTopicId, UnknownTopicOrPartition)
from mmlog.ipc.control_channel import DEFAULT_TIMEOUT_S
from mmlog.processors.handlers._common import answer
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import metadata as schema
from mmlog.security.acls import CREATE, DESCRIBE, TOPIC
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import AUTO_CREATE_TOPICS

API_KEY = schema.API_KEY
BY_ID_SINCE = 12  # Metadata v12: topics may be asked for by id
NO_ID = uuid.UUID(int=0)


def handle(ctx: HandlerContext, request):
    body = request.body
    ctx.manager.reload()
    known = ctx.manager.topics()  # a copy: taken once a request, not per name (2,000 names were quadratic)
    authorizer = ctx.authorizer
    refused: set[str] = set()  # answered TOPIC_AUTHORIZATION_FAILED
    if body.topics is None or (request.version == 0 and not body.topics):
        names = sorted(known)
        if authorizer.enabled:  # every topic: those the principal may not describe are left out
            names = [n for n in names if authorizer.allowed(request.conn, DESCRIBE, TOPIC, n)]
    elif any(t.name is None or t.topic_id != NO_ID for t in body.topics):
        return _by_id(ctx, request, known)
    else:
        names = [t.name for t in body.topics]
        refused = authorizer.denied(request.conn, DESCRIBE, TOPIC, names)
    missing = list(dict.fromkeys(n for n in names if n not in known and n not in refused))
    may_create = ctx.config["auto.create.topics.enable"] and (request.version < 4 or body.allow_auto_topic_creation)
    if missing and may_create and authorizer.enabled and not authorizer.cluster(request.conn, CREATE):
        refused |= authorizer.denied(request.conn, CREATE, TOPIC, missing)  # CREATE on the cluster or the topic
        missing = [n for n in missing if n not in refused]
    if missing and may_create:
        cap = ctx.config["auto.create.topics.max.per.request"]
        asked, later = missing[:cap], missing[cap:]

        def respond(pending):
            return _response(ctx, request.version, names, ctx.manager.topics(), pending, request.conn.listener_name,
                             refused)

        def created(ok, value):
            ctx.manager.reload()
            request.respond(respond(set(later) | set(value if ok and value else ())))

        # Whatever went wrong, the topics asked for are answered as being created (LEADER_NOT_AVAILABLE):
        # the client asks again.
        ctx.control.call(AUTO_CREATE_TOPICS, asked, created, DEFAULT_TIMEOUT_S,
                         lambda exc: answer(request, lambda: respond(set(missing))))
        return DEFERRED
    return _response(ctx, request.version, names, known, listener=request.conn.listener_name, refused=refused)


def topic_uuid(text: str) -> uuid.UUID:
    """A catalogue's topic id (32 hex digits; Kafka's tools write 22 characters of URL-safe base64)
    as a UUID; the zero UUID for a topic without one (a catalogue older than topic ids)."""
    try:
        if len(text) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        return uuid.UUID(hex=text)
    except ValueError:
        return NO_ID


def _by_id(ctx: HandlerContext, request, known: dict):
    """A v12+ request naming topics by id (Kafka's rule: the ids decide, names are ignored)."""
    if request.version < BY_ID_SINCE:
        raise InvalidRequest(f"Metadata v{request.version} cannot name topics by id or leave names null")
    names_of = {topic_uuid(info.topic_id): name for name, info in known.items()}
    names_of.pop(NO_ID, None)
    ids = list(dict.fromkeys(t.topic_id for t in request.body.topics))
    names = list(dict.fromkeys(names_of[i] for i in ids if i in names_of))
    unknown = [{"error_code": UnknownTopicId.code, "name": None, "topic_id": i, "partitions": []}
               for i in ids if i not in names_of]
    # Kafka: ids are not secret, so an id the principal may not describe answers TOPIC_AUTHORIZATION_FAILED
    denied = ctx.authorizer.denied(request.conn, DESCRIBE, TOPIC, names)
    unknown += [{"error_code": TopicAuthorizationFailed.code, "name": None, "topic_id": topic_uuid(known[n].topic_id),
                 "partitions": []} for n in names if n in denied]
    response = _response(ctx, request.version, [n for n in names if n not in denied], known,
                         listener=request.conn.listener_name)
    response.topics = unknown + response.topics
    return response


def _response(ctx: HandlerContext, version: int, names: list[str], topics: dict, pending: set[str] = frozenset(),
              listener: str | None = None, refused: set[str] = frozenset()):
    """`version`: the request's; `topics`: the catalogue; `pending`: unknown topics to be created when asked again
    (LEADER_NOT_AVAILABLE); `refused`: TOPIC_AUTHORIZATION_FAILED, existing or not. Brokers are given by
    their endpoint on `listener`, the one the request came in on (Kafka's rule)."""
    view = ctx.views.current()
    entries = ctx.metadata_entries  # encoded entries of unchanged topics (processors/metadata_cache.py)
    offline = tuple(ctx.manager.dir_health.offline_slots())
    out = []
    for name in names:
        if name in refused:
            out.append({"error_code": TopicAuthorizationFailed.code, "name": name, "partitions": []})
            continue
        info = topics.get(name)
        if info is None:
            code = LeaderNotAvailable.code if name in pending else UnknownTopicOrPartition.code
            out.append({"error_code": code, "name": name, "partitions": []})
            continue
        out.append(entries.entry(name, info, view, offline, version,
                                 lambda: schema.RESPONSE.encode_item("topics", _topic(ctx, name, info, view), version)))
    entries.prune(topics)
    return schema.RESPONSE(
        throttle_time_ms=0,
        brokers=[{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}  # on the request's listener
                 for b in view.brokers.values() for host, port in (b.address(listener),)],
        cluster_id=ctx.cluster_id,
        controller_id=view.controller_id,
        topics=out,
    )


def _topic(ctx: HandlerContext, name: str, info, view) -> dict:
    """An existing topic's entry: what `metadata_cache.TopicEntries` keeps encoded (see there what it depends on)."""
    partitions = [_partition(name, p, info.replicas(p, ctx.broker_id), view, ctx) for p in range(info.partitions)]
    return {"error_code": 0, "name": name, "topic_id": topic_uuid(info.topic_id), "is_internal": False,
            "partitions": partitions}


def _partition(topic: str, index: int, replicas: list[int], view, ctx: HandlerContext) -> dict:
    state = view.partition(topic, index)
    # The leader epoch matters to clients: librdkafka fences its fetches with it, and sends 0 where we say -1
    # (unknown), which every leader after the first answers FENCED_LEADER_EPOCH.
    leader, epoch, isr = (replicas[0], -1, replicas) if state is None else state
    offline = [r for r in replicas if r not in view.brokers]
    entry = {"error_code": 0, "partition_index": index, "leader_id": leader, "leader_epoch": epoch,
             "replica_nodes": replicas, "isr_nodes": isr, "offline_replicas": offline}
    if leader not in view.brokers:
        entry.update(error_code=LeaderNotAvailable.code, leader_id=-1)
    me = ctx.broker_id
    if me in replicas and ctx.manager.is_offline(topic, index):  # its log dir here failed
        entry.update(isr_nodes=[r for r in isr if r != me], offline_replicas=sorted({*offline, me}))
        if leader == me:
            entry.update(error_code=KafkaStorageError.code, leader_id=-1)
    return entry
