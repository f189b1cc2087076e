"""ListGroups (16): every group the coordinator knows (with members or only offsets).

v4+ may keep only groups in some states (``states_filter``, Kafka's state names) and answers
each group's state.
"""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import list_groups as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    states = list(request.body.states_filter) if request.version >= 4 else []
    return forward(ctx, request, "list_groups", states,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE, "groups": []})
