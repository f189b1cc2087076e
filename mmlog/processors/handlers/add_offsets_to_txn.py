"""AddOffsetsToTxn (25): a consumer group's offsets join a transaction; forwarded to its coordinator."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, fenced_for, forward
from mmlog.protocol.messages import add_offsets_to_txn as schema

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx, request):
    body = request.body
    translate = fenced_for(request.header.api_version, FENCED_SINCE)
    args = {"transactional_id": body.transactional_id, "producer_id": body.producer_id,
            "producer_epoch": body.producer_epoch, "group_id": body.group_id}
    return forward(ctx, request, "txn_add_offsets", args,
                   lambda v: schema.RESPONSE(throttle_time_ms=0, error_code=translate(v["error_code"])),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE})
