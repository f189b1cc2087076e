"""AlterClientQuotas (49): set or remove user / client-id quotas (the control plane checks and stores them).

Each entry answers for itself: INVALID_REQUEST for an entity type other than user and
client-id, an empty name, a key other than producer_byte_rate, consumer_byte_rate and
request_percentage, or a byte rate that is not a whole number (Kafka's words); the
valid entries are stored together, none with validate_only. Every processor enforces
the new quotas within `CATALOGUE_CHECK_S` (worker.py).
"""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import alter_client_quotas as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import ALTER_CLIENT_QUOTAS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.ALTER_CONFIGS):
        return schema.RESPONSE(throttle_time_ms=0, entries=[
            {"error_code": ClusterAuthorizationFailed.code, "error_message": "not authorized to alter quotas",
             "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
            for entry in request.body.entries])
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, op.value, op.remove) for op in entry.ops]) for entry in request.body.entries]

    def respond(results):
        ctx.manager.reload()
        return schema.RESPONSE(throttle_time_ms=0, entries=[
            {"error_code": code, "error_message": message,
             "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity]}
            for entity, code, message in results])

    return forward(ctx, request, ALTER_CLIENT_QUOTAS,
                   {"entries": entries, "validate_only": request.body.validate_only}, respond,
                   lambda code: [(entity, code, failure_message(code)) for entity, _ in entries])
