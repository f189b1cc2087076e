"""AlterConfigs (33): replace topics' config overrides or a broker's dynamic configs (the control plane checks,
stores and applies them: cluster/topic_configs.py, cluster/broker_configs.py).

Each resource answers for itself: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (an
unknown name, a bad value, a broker setting read only at start), INVALID_REQUEST
(another broker's id). validate_only checks without changing anything. Every
processor sees the new configs within `CATALOGUE_CHECK_S` (worker.py), this one
at once.
"""

from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import alter_configs as schema
from mmlog.processors.handlers._common import config_refusal
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import ALTER_CONFIGS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    resources = [(r.resource_type, r.resource_name, [(c.name, 0, c.value) for c in r.configs])
                 for r in request.body.resources]
    return forward_alter(ctx, request, schema, resources, incremental=False)


def forward_alter(ctx: HandlerContext, request, module, resources, incremental: bool):
    """Both APIs' forwarding: the same op, the same response shape."""
    refused = [(kind, name, code, "not authorized to alter its configs") for kind, name, _ in resources
               for code in (config_refusal(ctx, request.conn, acls.ALTER_CONFIGS, kind, name),) if code]
    if refused:
        resources = [r for r in resources if (r[0], r[1]) not in {(k, n) for k, n, _, _ in refused}]

    def respond(results):
        ctx.manager.reload()
        return module.RESPONSE(throttle_time_ms=0, responses=[
            {"error_code": code, "error_message": msg, "resource_type": kind, "resource_name": name}
            for kind, name, code, msg in [*results, *refused]])

    if not resources:
        return respond([])

    return forward(ctx, request, ALTER_CONFIGS,
                   {"resources": resources, "validate_only": request.body.validate_only, "incremental": incremental},
                   respond, lambda code: [(kind, name, code, failure_message(code))
                                     for kind, name, _ in resources])
