"""CreateTopics (19): forwarded to the control plane, which owns the topic catalogue.

v5+ answers, for each topic made (or that validate_only would make), its partition count,
replication factor and configs with their sources, as Kafka does (KIP-525); a refused topic
keeps -1, -1 and no configs.
"""

from mmlog.processors.handlers.describe_configs import topic_configs
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import create_topics as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed

API_KEY = schema.API_KEY
DETAILS_SINCE = 5


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
        if request.version >= DETAILS_SINCE:
            by_name = {spec["name"]: spec for spec in specs}
            for topic in topics:
                if topic["error_code"] == 0:
                    topic.update(_details(ctx, by_name[topic["name"]], body.validate_only))
        request.respond(schema.RESPONSE(throttle_time_ms=0, topics=topics))

    if not specs:
        done(True, [])
        return DEFERRED
    ctx.control.call("create_topics", {"topics": specs, "validate_only": body.validate_only}, done)
    return DEFERRED


def _details(ctx, spec: dict, validate_only: bool) -> dict:
    """num_partitions, replication_factor and configs of a topic made (or, validate_only, to be made)."""
    overrides = {k: v for k, v in spec["configs"].items() if v is not None}
    if validate_only:
        partitions = spec["partitions"] if spec["partitions"] != -1 else ctx.config["num.partitions"]
        factor = spec["replication_factor"]
        factor = factor if factor != -1 else ctx.config["default.replication.factor"]
    else:
        info = ctx.manager.topic(spec["name"])
        partitions, factor, overrides = info.partitions, len(info.replicas(0, ctx.broker_id)), info.config
    configs = [{k: c[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
               for c in topic_configs(ctx, overrides)]
    return {"num_partitions": partitions, "replication_factor": factor, "configs": configs}
