"""FindCoordinator (10): this broker coordinates every group (standalone mode).

Answered in the processor, from the same node id, host and port as Metadata:
librdkafka opens a separate connection to the coordinator, so they must match.
Transactions are not supported, so a transaction coordinator is not available.
"""

from mmlog.protocol.messages import find_coordinator as schema

API_KEY = schema.API_KEY
GROUP, TRANSACTION = 0, 1
COORDINATOR_NOT_AVAILABLE = 15
INVALID_REQUEST = 42


def handle(ctx, request):
    key_type = request.body.key_type
    if key_type == GROUP:
        return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None,
                               node_id=ctx.broker_id, host=ctx.host, port=ctx.port)
    code = COORDINATOR_NOT_AVAILABLE if key_type == TRANSACTION else INVALID_REQUEST
    message = "transactions are not supported" if key_type == TRANSACTION else f"unknown key type {key_type}"
    return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1, host="", port=-1)
