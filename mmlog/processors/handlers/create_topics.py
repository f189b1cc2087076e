"""CreateTopics (19): forwarded to the control plane, which owns the topic catalogue."""

from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import create_topics as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed

API_KEY = schema.API_KEY


def handle(ctx, request):
    body = request.body
    specs = [
        {
            "name": t.name,
            "partitions": t.num_partitions,
            "replication_factor": t.replication_factor,
            "assignments": bool(t.assignments),
            "configs": {c.name: c.value for c in t.configs},
        }
        for t in body.topics
    ]

    refused = []
    authorizer = ctx.authorizer
    if authorizer.enabled and not authorizer.cluster(request.conn, acls.CREATE):
        denied = authorizer.denied(request.conn, acls.CREATE, acls.TOPIC, [s["name"] for s in specs])
        refused = [(n, TopicAuthorizationFailed.code, f"not authorized to create topic {n!r}") for n in denied]
        specs = [s for s in specs if s["name"] not in denied]

    def done(ok, value):
        if not ok:
            value = [(s["name"], 15, str(value)) for s in specs]  # COORDINATOR_NOT_AVAILABLE
        ctx.manager.reload()
        topics = [{"name": n, "error_code": code, "error_message": msg} for n, code, msg in [*value, *refused]]
        request.respond(schema.RESPONSE(throttle_time_ms=0, topics=topics))

    if not specs:
        done(True, [])
        return DEFERRED
    ctx.control.call("create_topics", {"topics": specs, "validate_only": body.validate_only}, done)
    return DEFERRED
