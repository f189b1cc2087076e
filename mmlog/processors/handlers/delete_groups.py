"""DeleteGroups (42): delete empty groups and their committed offsets (the group coordinator decides).

Per group: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if unknown,
NOT_COORDINATOR if another broker coordinates it, INVALID_GROUP_ID for "".
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import delete_groups as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import DELETE_GROUPS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    names = list(request.body.groups_names)
    denied = ctx.authorizer.denied(request.conn, acls.DELETE, acls.GROUP, names)
    refused = [{"group_id": g, "error_code": GroupAuthorizationFailed.code} for g in names if g in denied]
    names = [g for g in names if g not in denied]
    if not names:
        return schema.RESPONSE(throttle_time_ms=0, results=refused)
    return forward(ctx, request, DELETE_GROUPS, names,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, results=[*value["results"], *refused]),
                   lambda code: {"results": [{"group_id": g, "error_code": code} for g in names]})
