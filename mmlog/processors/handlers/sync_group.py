"""SyncGroup (14): forwarded to the group coordinator; the leader's call carries every assignment,
and each member's call is answered with its own once the leader's has arrived."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward, member_args
from mmlog.protocol.messages import sync_group as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed

API_KEY = schema.API_KEY


def handle(ctx, request):
    if not ctx.authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, assignment=b"")
    body = request.body
    args = member_args(request, 3, assignments=[(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return forward(ctx, request, "sync_group", args,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE, "assignment": b""})
