"""CreatePartitions (37): forwarded to the control plane, which owns the topic catalogue."""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import create_partitions as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import CREATE_PARTITIONS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body = request.body
    specs = [{"name": t.name, "count": t.count,
              "assignments": None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]}
             for t in body.topics]

    denied = ctx.authorizer.denied(request.conn, acls.ALTER, acls.TOPIC, [s["name"] for s in specs])
    refused = [(n, TopicAuthorizationFailed.code, f"not authorized to alter topic {n!r}") for n in denied]
    specs = [s for s in specs if s["name"] not in denied]

    def respond(results):
        ctx.manager.reload()  # the grown topics are in the catalogue: Metadata here shows them at once
        return schema.RESPONSE(throttle_time_ms=0, results=[
            {"name": n, "error_code": code, "error_message": msg} for n, code, msg in [*results, *refused]])

    if not specs:
        return respond([])

    return forward(ctx, request, CREATE_PARTITIONS, {"topics": specs, "validate_only": body.validate_only},
                   respond, lambda code: [(s["name"], code, failure_message(code)) for s in specs],
                   timeout_ms=body.timeout_ms)
