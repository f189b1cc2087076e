"""Heartbeat (12): forwarded to the group coordinator; REBALANCE_IN_PROGRESS tells a member to rejoin."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import heartbeat as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    body = request.body
    args = {
        "group_id": body.group_id,
        "generation_id": body.generation_id,
        "member_id": body.member_id,
        "group_instance_id": body.group_instance_id if request.version >= 3 else None,
    }
    return forward(ctx, request, "heartbeat", args,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE})
