"""SyncGroup (14): forwarded to the group coordinator; the leader's call carries every assignment,
and each member's call is answered with its own once the leader's has arrived.

v5+ may name the protocol type and name the member expects (INCONSISTENT_GROUP_PROTOCOL if
they are not the group's, as in Kafka), and a successful answer names the group's.
"""

from mmlog.processors.handlers._common import forward, member_args
from mmlog.protocol.messages import sync_group as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import SYNC_GROUP

API_KEY = schema.API_KEY
SYNC_MARGIN_MS = 10_000  # a SyncGroup waits for its leader's, at most the leader's session
PROTOCOL_SINCE = 5


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, assignment=b"")
    body = request.body
    named = request.version >= PROTOCOL_SINCE
    args = member_args(request, 3, assignments=[(a.member_id, bytes(a.assignment)) for a in body.assignments],
                       protocol_type=body.protocol_type if named else None,
                       protocol_name=body.protocol_name if named else None)
    return forward(ctx, request, SYNC_GROUP, args,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda code: {"error_code": code, "assignment": b""},
                   wait_ms=ctx.config["group.max.session.timeout.ms"] + SYNC_MARGIN_MS)  # waits for the leader
