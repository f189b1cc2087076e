"""DeleteTopics (20): forwarded to the control plane, which owns the topic catalogue."""

from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import delete_topics as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    names = list(request.body.topic_names)

    def done(ok, value):
        if not ok:
            value = [(n, 15) for n in names]
        ctx.manager.reload()
        request.respond(schema.RESPONSE(throttle_time_ms=0, responses=[
            {"name": n, "error_code": code} for n, code in value]))

    ctx.control.call("delete_topics", names, done)
    return DEFERRED
