"""DeleteGroups (42): delete empty groups and their committed offsets (the group coordinator decides).

Per group: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if unknown,
NOT_COORDINATOR if another broker coordinates it, INVALID_GROUP_ID for "".
"""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import delete_groups as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    names = list(request.body.groups_names)
    return forward(ctx, request, "delete_groups", names,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"results": [{"group_id": g, "error_code": COORDINATOR_NOT_AVAILABLE} for g in names]})
