"""DescribeGroups (15): state, protocol and members of groups.

An unknown group is described as state Dead with error 0, as Kafka does before
v6. Member metadata and assignments are filled only while the group is Stable.
Authorized operations are not computed (INT32_MIN, "not requested").
"""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import describe_groups as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    names = list(request.body.groups)
    return forward(ctx, request, "describe_groups", names,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"groups": [{"error_code": COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "",
                                        "protocol_type": "", "protocol_data": "", "members": []} for g in names]})
