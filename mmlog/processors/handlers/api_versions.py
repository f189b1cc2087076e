"""ApiVersions (18): the APIs and version ranges this broker serves."""

from mmlog.protocol.messages import api_versions as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    from mmlog.processors.dispatch import advertised_versions

    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised_versions()]
    return schema.RESPONSE(error_code=0, api_keys=keys, throttle_time_ms=0)
