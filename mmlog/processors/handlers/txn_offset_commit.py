"""TxnOffsetCommit (28): offsets committed inside a transaction; forwarded to the group coordinator,
which keeps them pending until the transaction's marker (`send_offsets_to_transaction`)."""

from mmlog.processors.handlers._common import fenced_for, forward
from mmlog.protocol.messages import txn_offset_commit as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed, TopicAuthorizationFailed, TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_OFFSET_COMMIT

API_KEY = schema.API_KEY
FENCED_SINCE = 3


def handle(ctx: HandlerContext, request):
    body = request.body
    version = request.header.api_version
    topics = [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                        for p in t.partitions]) for t in body.topics]
    translate = fenced_for(version, FENCED_SINCE)
    args = {"transactional_id": body.transactional_id, "group_id": body.group_id, "producer_id": body.producer_id,
            "producer_epoch": body.producer_epoch, "topics": topics,
            # generation and member arrive with v3 (KIP-447); before that the coordinator cannot check them
            "generation_id": body.generation_id if version >= 3 else -1,
            "member_id": body.member_id if version >= 3 else "",
            "group_instance_id": body.group_instance_id if version >= 3 else None}

    def respond(value):
        for t in value["topics"]:
            for p in t["partitions"]:
                p["error_code"] = translate(p["error_code"])
        return schema.RESPONSE(throttle_time_ms=0, **value)

    authorizer = ctx.authorizer
    if authorizer.enabled:  # Kafka's rule: WRITE on the transactional id, READ on the group, READ on each topic
        code = 0
        if not authorizer.allowed(request.conn, acls.WRITE, acls.TRANSACTIONAL_ID, body.transactional_id):
            code = TransactionalIdAuthorizationFailed.code
        elif not authorizer.allowed(request.conn, acls.READ, acls.GROUP, body.group_id):
            code = GroupAuthorizationFailed.code
        denied = authorizer.denied(request.conn, acls.READ, acls.TOPIC, {t for t, _ in topics})
        if code or denied:
            return schema.RESPONSE(throttle_time_ms=0, topics=[
                {"name": t, "partitions": [{"partition_index": p[0], "error_code": code or (
                    TopicAuthorizationFailed.code if t in denied else 0)} for p in ps]} for t, ps in topics])
    return forward(ctx, request, TXN_OFFSET_COMMIT, args, respond,
                   lambda code: {"topics": [{"name": t, "partitions": [
                       {"partition_index": p[0], "error_code": code} for p in ps]}
                       for t, ps in topics]})
