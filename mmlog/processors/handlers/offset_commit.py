"""OffsetCommit (8): forwarded to the group coordinator, answered once the offsets are stored.

assign() consumers commit with generation -1 and no member id; the coordinator
accepts that while the group has no members, as Kafka does. retention_time_ms
(v2-4) is ignored: `offsets.retention.minutes` decides, as in Kafka 2.1+.
"""

from mmlog.errors import GroupAuthorizationFailed, TopicAuthorizationFailed
from mmlog.processors.handlers._common import forward, member_args
from mmlog.protocol.messages import offset_commit as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import OFFSET_COMMIT

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body = request.body
    topics = [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                        for p in t.partitions]) for t in body.topics]
    refused, code = [], 0  # topics answered here, with this code (Kafka: READ on the group, then each topic)
    authorizer = ctx.authorizer
    if authorizer.enabled:
        if not authorizer.allowed(request.conn, acls.READ, acls.GROUP, body.group_id):
            refused, topics, code = topics, [], GroupAuthorizationFailed.code
        else:
            denied = authorizer.denied(request.conn, acls.READ, acls.TOPIC, {t for t, _ in topics})
            refused, code = [(t, ps) for t, ps in topics if t in denied], TopicAuthorizationFailed.code
            topics = [(t, ps) for t, ps in topics if t not in denied]
    if refused and not topics:
        return _answer([], refused, code)
    args = member_args(request, 7, topics=topics)
    return forward(ctx, request, OFFSET_COMMIT, args,
                   lambda value: _answer(value["topics"], refused, code),
                   lambda code: {"topics": [{"name": t, "partitions": [
                       {"partition_index": p[0], "error_code": code} for p in ps]}
                       for t, ps in topics]})


def _answer(answered: list, refused, code: int):
    """The coordinator's answer (`answered`, a list of topics) plus the topics refused here with `code`."""
    return schema.RESPONSE(throttle_time_ms=0, topics=[*answered, *({"name": t, "partitions": [
        {"partition_index": p[0], "error_code": code} for p in ps]} for t, ps in refused)])
