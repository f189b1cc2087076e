"""ApiVersions (18): the APIs and version ranges this broker serves."""

from mmlog.protocol.messages import api_versions as schema
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    """The processor's advertised versions (`handlers.advertised_versions`, computed once at its start)."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in ctx.advertised_versions]
    return schema.RESPONSE(error_code=0, api_keys=keys, throttle_time_ms=0)
