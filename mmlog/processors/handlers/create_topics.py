"""CreateTopics (19): forwarded to the control plane, which owns the topic catalogue."""

from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import create_topics as schema

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

    def done(ok, value):
        if not ok:
            value = [(s["name"], 15, str(value)) for s in specs]  # COORDINATOR_NOT_AVAILABLE
        ctx.manager.reload()
        topics = [{"name": n, "error_code": code, "error_message": msg} for n, code, msg in value]
        request.respond(schema.RESPONSE(throttle_time_ms=0, topics=topics))

    ctx.control.call("create_topics", {"topics": specs, "validate_only": body.validate_only}, done)
    return DEFERRED
