"""OffsetDelete (47): delete a group's committed offsets of some partitions (the group coordinator decides).

A group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR...) is
the top-level code with no topics, as Kafka answers; otherwise each partition
says NONE, GROUP_SUBSCRIBED_TO_TOPIC or UNKNOWN_TOPIC_OR_PARTITION.
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import offset_delete as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed, TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import OFFSET_DELETE

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body = request.body
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    authorizer = ctx.authorizer
    if not authorizer.allowed(request.conn, acls.DELETE, acls.GROUP, body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, topics=[])
    denied = authorizer.denied(request.conn, acls.READ, acls.TOPIC, {t for t, _ in topics})
    refused = [{"name": t, "partitions": [{"partition_index": p, "error_code": TopicAuthorizationFailed.code}
                                          for p in ps]} for t, ps in topics if t in denied]
    topics = [(t, ps) for t, ps in topics if t not in denied]
    if refused and not topics:
        return schema.RESPONSE(throttle_time_ms=0, error_code=0, topics=refused)
    return forward(ctx, request, OFFSET_DELETE, {"group_id": body.group_id, "topics": topics},
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **dict(value, topics=[*value["topics"], *refused])),
                   lambda code: {"error_code": code, "topics": []})
