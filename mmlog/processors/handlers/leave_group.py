"""LeaveGroup (13): forwarded to the group coordinator.

v0-2 name one member and carry one error code: the top-level error, or else that
member's (as Kafka's LeaveGroupResponse folds them). v3 names a batch of members,
by member id or group instance id, each with its own error.
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import leave_group as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import LEAVE_GROUP

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.allowed(request.conn, acls.READ, acls.GROUP, request.body.group_id):
        return schema.RESPONSE(throttle_time_ms=0, error_code=GroupAuthorizationFailed.code, members=[])
    body, version = request.body, request.version
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]

    def respond(value):
        if version < 3:
            code = value["error_code"] or next((m["error_code"] for m in value["members"] if m["error_code"]), 0)
            return schema.RESPONSE(throttle_time_ms=0, error_code=code)
        return schema.RESPONSE(throttle_time_ms=0, **value)

    return forward(ctx, request, LEAVE_GROUP, {"group_id": body.group_id, "members": members}, respond,
                   lambda code: {"error_code": code, "members": []})
