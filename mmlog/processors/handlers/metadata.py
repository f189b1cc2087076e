"""Metadata (3): this broker, the topics asked for, and their partition leaders.

A null topic list (v1+) or an empty one in v0 means every topic; an empty list in
v1+ means brokers only. Unknown topics are created through the control plane when
`auto.create.topics.enable` is on and the client allows it (v4+), and answered once
they exist. Leader epochs are reported as -1, which keeps clients from validating
positions with OffsetForLeaderEpoch (KAFKA_INTEROP §3).
"""

from __future__ import annotations

from mmlog.errors import UnknownTopicOrPartition
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import metadata as schema

API_KEY = schema.API_KEY
INVALID_TOPIC_EXCEPTION = 17


def handle(ctx, request):
    body = request.body
    ctx.manager.reload()
    if body.topics is None or (request.version == 0 and not body.topics):
        names = sorted(ctx.manager.topics())
    else:
        names = [t.name for t in body.topics]
    missing = [n for n in names if n not in ctx.manager.topics()]
    may_create = ctx.config["auto.create.topics.enable"] and (request.version < 4 or body.allow_auto_topic_creation)
    if missing and may_create:
        def created(ok, value):
            ctx.manager.reload()
            request.respond(_response(ctx, names))

        ctx.control.call("auto_create_topics", missing, created)
        return DEFERRED
    return _response(ctx, names)


def _response(ctx, names: list[str]):
    topics = ctx.manager.topics()
    me = ctx.broker_id
    out = []
    for name in names:
        info = topics.get(name)
        if info is None:
            out.append({"error_code": UnknownTopicOrPartition.code, "name": name, "partitions": []})
            continue
        partitions = [
            {"error_code": 0, "partition_index": p, "leader_id": me, "leader_epoch": -1,
             "replica_nodes": [me], "isr_nodes": [me], "offline_replicas": []}
            for p in range(info.partitions)
        ]
        out.append({"error_code": 0, "name": name, "is_internal": False, "partitions": partitions})
    return schema.RESPONSE(
        throttle_time_ms=0,
        brokers=[{"node_id": me, "host": ctx.host, "port": ctx.port, "rack": None}],
        cluster_id=ctx.cluster_id,
        controller_id=me,
        topics=out,
    )
