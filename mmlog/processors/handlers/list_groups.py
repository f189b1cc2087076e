"""ListGroups (16): every group the coordinator knows (with members or only offsets)."""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import list_groups as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    return forward(ctx, request, "list_groups", None,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"error_code": COORDINATOR_NOT_AVAILABLE, "groups": []})
