"""AddOffsetsToTxn (25): a consumer group's offsets join a transaction; forwarded to its coordinator."""

from mmlog.processors.handlers._common import forward_txn
from mmlog.protocol.messages import add_offsets_to_txn as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed, TransactionalIdAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import TXN_ADD_OFFSETS

API_KEY = schema.API_KEY
FENCED_SINCE = 2


def handle(ctx: HandlerContext, request):
    authorizer = ctx.authorizer
    if not authorizer.allowed(request.conn, acls.WRITE, acls.TRANSACTIONAL_ID, request.body.transactional_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=TransactionalIdAuthorizationFailed.code)
    if not authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code)
    body = request.body
    return forward_txn(ctx, request, TXN_ADD_OFFSETS, {
        "transactional_id": body.transactional_id, "producer_id": body.producer_id,
        "producer_epoch": body.producer_epoch, "group_id": body.group_id}, schema, FENCED_SINCE)
