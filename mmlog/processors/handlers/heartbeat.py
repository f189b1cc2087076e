"""Heartbeat (12): forwarded to the group coordinator; REBALANCE_IN_PROGRESS tells a member to rejoin."""

from mmlog.processors.handlers._common import forward, member_args
from mmlog.protocol.messages import heartbeat as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import HEARTBEAT

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code)
    return forward(ctx, request, HEARTBEAT, member_args(request, 3),
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda code: {"error_code": code})
