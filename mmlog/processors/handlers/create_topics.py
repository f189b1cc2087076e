"""CreateTopics (19): forwarded to the control plane, which owns the topic catalogue.

v5+ answers, for each topic made (or that validate_only would make), its partition count,
replication factor and configs with their sources, as Kafka does (KIP-525); a refused topic
keeps -1, -1 and no configs. Those details come with the control plane's answer, taken as the
topic was made: a topic deleted by another client before the answer arrives is still answered
as created, as Kafka's controller answers.
"""

from mmlog.processors.handlers._common import answer, control_timeout_s, error_code, failure_code
from mmlog.processors.handlers.describe_configs import topic_configs
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import create_topics as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import CREATE_TOPICS

API_KEY = schema.API_KEY
DETAILS_SINCE = 5


def handle(ctx: HandlerContext, request):
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
        refused = [(n, TopicAuthorizationFailed.code, f"not authorized to create topic {n!r}", None) for n in denied]
        specs = [s for s in specs if s["name"] not in denied]

    def failed(code: int, message: str) -> list:
        return [(s["name"], code, message, None) for s in specs]

    def done(ok, value):
        if not ok:
            code = failure_code(value)
            value = failed(code, str(value))
        ctx.manager.reload()
        request.respond(_response(ctx, request.version, [*value, *refused]))

    def fallback(exc: BaseException) -> None:
        answer(request, lambda: _response(ctx, request.version, [*failed(error_code(exc, logged=True), str(exc)),
                                                                 *refused]))

    if not specs:
        done(True, [])
        return DEFERRED
    ctx.control.call(CREATE_TOPICS, {"topics": specs, "validate_only": body.validate_only}, done,
                     control_timeout_s(body.timeout_ms), fallback)
    return DEFERRED


def _response(ctx: HandlerContext, version: int, results: list):
    topics = []
    for name, code, message, details in results:
        topic = {"name": name, "error_code": code, "error_message": message}
        if version >= DETAILS_SINCE and code == 0:
            topic.update(_details(ctx, *details))
        topics.append(topic)
    return schema.RESPONSE(throttle_time_ms=0, topics=topics)


def _details(ctx: HandlerContext, partitions: int, factor: int, overrides: dict) -> dict:
    """num_partitions, replication_factor and configs of a topic as made (or, validate_only, to be made)."""
    configs = [{k: c[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
               for c in topic_configs(ctx, overrides)]
    return {"num_partitions": partitions, "replication_factor": factor, "configs": configs}
