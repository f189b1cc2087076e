"""OffsetFetch (9): a group's committed offsets, read by the group coordinator.

A null topic list (v2+) asks for every partition the group committed. A
partition without a commit answers offset -1, no error. v5 returns the committed
leader epoch (-1 if none). v1 has no top-level error code: a group-level error
goes into every partition. v7+ may ask for stable offsets only (require_stable, KIP-447): a
partition with offsets pending in an open transaction then answers UNSTABLE_OFFSET_COMMIT.
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import offset_fetch as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed, TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import OFFSET_FETCH

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body, version = request.body, request.version
    topics = None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]

    authorizer = ctx.authorizer
    refused = []
    if authorizer.enabled:
        if not authorizer.allowed(request.conn, acls.DESCRIBE, acls.GROUP, body.group_id):
            return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, topics=[
                {"name": t, "partitions": [_entry(p, GroupAuthorizationFailed.code) for p in ps]}
                for t, ps in topics or ()])
        if topics is not None:
            denied = authorizer.denied(request.conn, acls.DESCRIBE, acls.TOPIC, {t for t, _ in topics})
            refused = [{"name": t, "partitions": [_entry(p, TopicAuthorizationFailed.code) for p in ps]}
                       for t, ps in topics if t in denied]
            topics = [(t, ps) for t, ps in topics if t not in denied]

    def respond(value):
        if authorizer.enabled:
            value = dict(value, topics=[*(t for t in value["topics"] if authorizer.allowed(
                request.conn, acls.DESCRIBE, acls.TOPIC, t["name"])), *refused])
        if version < 2 and value["error_code"]:
            for topic in value["topics"]:
                for partition in topic["partitions"]:
                    partition["error_code"] = value["error_code"]
        return schema.RESPONSE(throttle_time_ms=0, **value)

    def unavailable(code):
        return {"error_code": code,
                "topics": [{"name": t, "partitions": [_entry(p, 0) for p in ps]} for t, ps in topics or ()]}

    if topics == [] and refused:
        return respond({"error_code": 0, "topics": []})
    args = {"group_id": body.group_id, "topics": topics, "require_stable": version >= 7 and body.require_stable}
    return forward(ctx, request, OFFSET_FETCH, args, respond, unavailable)


def _entry(partition: int, code: int) -> dict:
    return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
            "error_code": code}
