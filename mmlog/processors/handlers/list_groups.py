"""ListGroups (16): every group the coordinator knows (with members or only offsets).

v4+ may keep only groups in some states (``states_filter``, Kafka's state names) and answers
each group's state.
"""

from mmlog.processors.handlers._common import forward
from mmlog.protocol.messages import list_groups as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import LIST_GROUPS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    authorizer = ctx.authorizer
    states = list(request.body.states_filter) if request.version >= 4 else []

    def visible(value):
        if authorizer.enabled and not authorizer.cluster(request.conn, acls.DESCRIBE):
            value = dict(value, groups=[g for g in value["groups"]
                                        if authorizer.allowed(request.conn, acls.DESCRIBE, acls.GROUP, g["group_id"])])
        return schema.RESPONSE(throttle_time_ms=0, **value)

    return forward(ctx, request, LIST_GROUPS, states, visible,
                   lambda code: {"error_code": code, "groups": []})
