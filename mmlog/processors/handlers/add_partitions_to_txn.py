"""AddPartitionsToTxn (24): forwarded to the transaction coordinator, answered per partition."""

from mmlog.processors.handlers._common import fenced_for, forward
from mmlog.protocol.messages import add_partitions_to_txn as schema
from mmlog.security import acls
from mmlog.errors import OperationNotAttempted, TopicAuthorizationFailed, TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_ADD_PARTITIONS

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx: HandlerContext, request):
    body = request.body
    topics = [(t.name, list(t.partitions)) for t in body.v3_and_below_topics]
    translate = fenced_for(request.header.api_version, FENCED_SINCE)

    def respond(codes: dict):
        return schema.RESPONSE(throttle_time_ms=0, results_by_topic_v3_and_below=[
            {"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": translate(code)}
                                                 for p, code in parts.items()]} for t, parts in codes.items()])

    args = {"transactional_id": body.v3_and_below_transactional_id, "producer_id": body.v3_and_below_producer_id,
            "producer_epoch": body.v3_and_below_producer_epoch, "topics": topics}
    authorizer = ctx.authorizer
    if authorizer.enabled:  # Kafka's rule: WRITE on the transactional id, then on every topic, or nothing is added
        if not authorizer.allowed(request.conn, acls.WRITE, acls.TRANSACTIONAL_ID, args["transactional_id"]):
            return respond({t: {p: TransactionalIdAuthorizationFailed.code for p in ps} for t, ps in topics})
        denied = authorizer.denied(request.conn, acls.WRITE, acls.TOPIC, {t for t, _ in topics})
        if denied:
            return respond({t: {p: TopicAuthorizationFailed.code if t in denied else OperationNotAttempted.code
                                for p in ps} for t, ps in topics})
    return forward(ctx, request, TXN_ADD_PARTITIONS, args, respond,
                   lambda code: {t: {p: code for p in ps} for t, ps in topics})
