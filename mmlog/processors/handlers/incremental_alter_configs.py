"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT topic or broker configs (the control plane)."""

from mmlog.processors.handlers import alter_configs
from mmlog.protocol.messages import incremental_alter_configs as schema
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    resources = [(r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs])
                 for r in request.body.resources]
    return alter_configs.forward_alter(ctx, request, schema, resources, incremental=True)
