"""EndTxn (26): commit or abort; forwarded to the transaction coordinator, answered once the
Prepare{Commit,Abort} state is replicated (the markers follow)."""

from mmlog.processors.handlers._common import forward_txn
from mmlog.protocol.messages import end_txn as schema
from mmlog.security import acls
from mmlog.errors import TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_END

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.allowed(request.conn, acls.WRITE, acls.TRANSACTIONAL_ID, request.body.transactional_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=TransactionalIdAuthorizationFailed.code)
    body = request.body
    return forward_txn(ctx, request, TXN_END, {
        "transactional_id": body.transactional_id, "producer_id": body.producer_id,
        "producer_epoch": body.producer_epoch, "committed": body.committed}, schema, FENCED_SINCE)
