"""DescribeGroups (15): state, protocol and members of groups.

An unknown group is described as state Dead with error 0, as Kafka does before
v6. Member metadata and assignments are filled only while the group is Stable.
Authorized operations are not computed (INT32_MIN, "not requested").
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import describe_groups as schema
from mmlog.security import acls
from mmlog.errors import GroupAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import DESCRIBE_GROUPS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    names = list(request.body.groups)
    denied = ctx.authorizer.denied(request.conn, acls.DESCRIBE, acls.GROUP, names)
    if denied:  # answered here, in request order with the others'
        refused = {g: {"error_code": GroupAuthorizationFailed.code, "group_id": g, "group_state": "",
                       "protocol_type": "", "protocol_data": "", "members": []} for g in denied}
        allowed = [g for g in names if g not in denied]

        def merged(value):
            found = {g["group_id"]: g for g in value["groups"]}
            return schema.RESPONSE(throttle_time_ms=0, groups=[refused.get(g) or found[g] for g in names])

        if not allowed:
            return merged({"groups": []})
        return forward(ctx, request, DESCRIBE_GROUPS, allowed, merged,
                       lambda code: {"groups": [{"error_code": code, "group_id": g, "group_state": "",
                                            "protocol_type": "", "protocol_data": "", "members": []}
                                           for g in allowed]})
    return forward(ctx, request, DESCRIBE_GROUPS, names,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda code: {"groups": [{"error_code": code, "group_id": g, "group_state": "",
                                        "protocol_type": "", "protocol_data": "", "members": []} for g in names]})
