"""DeleteTopics (20): forwarded to the control plane, which owns the topic catalogue."""

from mmlog.processors.handlers._common import answer, control_timeout_s, error_code, failure_code
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import delete_topics as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import DELETE_TOPICS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    names = list(request.body.topic_names)
    denied = ctx.authorizer.denied(request.conn, acls.DELETE, acls.TOPIC, names)
    refused = [(n, TopicAuthorizationFailed.code) for n in names if n in denied]
    names = [n for n in names if n not in denied]

    def respond(value):
        return schema.RESPONSE(throttle_time_ms=0, responses=[
            {"name": n, "error_code": code} for n, code in [*value, *refused]])

    def done(ok, value):
        if not ok:
            code = failure_code(value)
            value = [(n, code) for n in names]
        ctx.manager.reload()
        request.respond(respond(value))

    if not names:
        done(True, [])
        return DEFERRED
    ctx.control.call(DELETE_TOPICS, names, done, control_timeout_s(request.body.timeout_ms),
                     lambda exc: answer(request, lambda: respond([(n, error_code(exc, logged=True)) for n in names])))
    return DEFERRED
