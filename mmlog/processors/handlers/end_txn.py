"""EndTxn (26): commit or abort; forwarded to the transaction coordinator, answered once the
Prepare{Commit,Abort} state is replicated (the markers follow)."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, fenced_for, forward
from mmlog.protocol.messages import end_txn as schema

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx, request):
    body = request.body
    translate = fenced_for(request.header.api_version, FENCED_SINCE)
    args = {"transactional_id": body.transactional_id, "producer_id": body.producer_id,
            "producer_epoch": body.producer_epoch, "committed": body.committed}
    return forward(ctx, request, "txn_end", args,
                   lambda v: schema.RESPONSE(throttle_time_ms=0, error_code=translate(v["error_code"])),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE})
