"""FindCoordinator (10): the live broker that coordinates a group.

Answered in the processor from the cluster view (`ipc/cluster_view.py`:
rendezvous hashing over live brokers; standalone, this broker), with the same
node id, host and port as Metadata: librdkafka opens a separate connection to the
coordinator, so they must match. Transactions are not supported, so a
transaction coordinator is not available.
"""

from mmlog.errors import InvalidRequest
from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE
from mmlog.protocol.messages import find_coordinator as schema

API_KEY = schema.API_KEY
GROUP, TRANSACTION = 0, 1


def handle(ctx, request):
    key_type = request.body.key_type
    if key_type == GROUP:
        view = ctx.views.current()
        node = view.coordinator_for(request.body.key)
        if node >= 0:
            b = view.brokers[node]
            return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None,
                                   node_id=b.node_id, host=b.host, port=b.port)
        code, message = COORDINATOR_NOT_AVAILABLE, "no live broker"
    elif key_type == TRANSACTION:
        code, message = COORDINATOR_NOT_AVAILABLE, "transactions are not supported"
    else:
        code, message = InvalidRequest.code, f"unknown key type {key_type}"
    return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1, host="", port=-1)
