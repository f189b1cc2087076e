"""AddPartitionsToTxn (24): forwarded to the transaction coordinator, answered per partition."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, fenced_for, forward
from mmlog.protocol.messages import add_partitions_to_txn as schema

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx, request):
    body = request.body
    topics = [(t.name, list(t.partitions)) for t in body.v3_and_below_topics]
    translate = fenced_for(request.header.api_version, FENCED_SINCE)

    def respond(codes: dict):
        return schema.RESPONSE(throttle_time_ms=0, results_by_topic_v3_and_below=[
            {"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": translate(code)}
                                                 for p, code in parts.items()]} for t, parts in codes.items()])

    args = {"transactional_id": body.v3_and_below_transactional_id, "producer_id": body.v3_and_below_producer_id,
            "producer_epoch": body.v3_and_below_producer_epoch, "topics": topics}
    return forward(ctx, request, "txn_add_partitions", args, respond,
                   lambda: {t: {p: COORDINATOR_NOT_AVAILABLE for p in ps} for t, ps in topics})
