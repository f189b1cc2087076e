"""DescribeConfigs (32): a topic's effective configuration (Kafka names), or a broker's."""

from mmlog.processors.handlers._common import error_code
from mmlog.protocol.messages import describe_configs as schema

API_KEY = schema.API_KEY
TOPIC, BROKER = 2, 4
# config_source values (DescribeConfigsResponse.json)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
INVALID_REQUEST = 42


def handle(ctx, request):
    results = []
    for res in request.body.resources:
        result = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                  "resource_name": res.resource_name, "configs": []}
        try:
            if res.resource_type == TOPIC:
                result["configs"] = _topic_configs(ctx, res.resource_name, res.configuration_keys)
            elif res.resource_type == BROKER:
                result["configs"] = _broker_configs(ctx, res.configuration_keys)
            else:
                result.update(error_code=INVALID_REQUEST, error_message="only topic and broker resources")
        except Exception as exc:  # noqa: BLE001
            result.update(error_code=error_code(exc), error_message=str(exc))
        results.append(result)
    return schema.RESPONSE(throttle_time_ms=0, results=results)


def _entry(name, value, source, read_only=False):
    text = None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return {"name": name, "value": text, "read_only": read_only, "config_source": source, "is_sensitive": False,
            "synonyms": [], "config_type": 0, "documentation": None}


def _topic_configs(ctx, topic, keys):
    info = ctx.manager.topic(topic)
    effective = ctx.manager.config_for(topic).to_props()
    return [
        _entry(name, value, DYNAMIC_TOPIC_CONFIG if name in info.config else DEFAULT_CONFIG)
        for name, value in effective.items()
        if keys is None or name in keys
    ]


def _broker_configs(ctx, keys):
    return [
        _entry(name, value, STATIC_BROKER_CONFIG, read_only=True)
        for name, value in sorted(ctx.config.values.items())
        if (keys is None or name in keys) and value is not None
    ]
