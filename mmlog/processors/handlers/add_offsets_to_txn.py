"""AddOffsetsToTxn (25): a consumer group's offsets join a transaction; forwarded to its coordinator."""

from mmlog.processors.handlers._common import forward_txn
from mmlog.protocol.messages import add_offsets_to_txn as schema

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx, request):
    body = request.body
    return forward_txn(ctx, request, "txn_add_offsets", {
        "transactional_id": body.transactional_id, "producer_id": body.producer_id,
        "producer_epoch": body.producer_epoch, "group_id": body.group_id}, schema, FENCED_SINCE)
