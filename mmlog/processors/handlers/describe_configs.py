"""DescribeConfigs (32): a topic's effective configuration (Kafka names), or a broker's.

Each topic config says where its value comes from, as Kafka does: DYNAMIC_TOPIC_CONFIG
(an override set at creation or by AlterConfigs), STATIC_BROKER_CONFIG (the broker's
server.properties sets the broker-level synonym, e.g. log.retention.ms, to other than
its default) or DEFAULT_CONFIG. With include_synonyms (v1+) each config lists them
all, the winning one first: the topic override, then the broker setting, then the
default under the broker setting's name.
"""

from mmlog.config.broker import BROKER_SETTINGS, is_sensitive
from mmlog.config.settings import BROKER_TOPIC_DEFAULTS
from mmlog.processors.handlers._common import error_code
from mmlog.protocol.messages import describe_configs as schema

API_KEY = schema.API_KEY
TOPIC, BROKER = 2, 4
# config_source values (DescribeConfigsResponse.json)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
INVALID_REQUEST = 42
BROKER_NAME = {topic: broker for broker, topic in BROKER_TOPIC_DEFAULTS.items()}  # retention.ms -> log.retention.ms


def handle(ctx, request):
    ctx.manager.reload()  # one stat: an AlterConfigs answered by another processor shows at once
    results = []
    for res in request.body.resources:
        result = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                  "resource_name": res.resource_name, "configs": []}
        try:
            if res.resource_type == TOPIC:
                result["configs"] = _topic_configs(ctx, res.resource_name, res.configuration_keys,
                                                   request.version >= 1 and request.body.include_synonyms)
            elif res.resource_type == BROKER:
                result["configs"] = _broker_configs(ctx, res.configuration_keys)
            else:
                result.update(error_code=INVALID_REQUEST, error_message="only topic and broker resources")
        except Exception as exc:  # noqa: BLE001
            result.update(error_code=error_code(exc), error_message=str(exc))
        results.append(result)
    return schema.RESPONSE(throttle_time_ms=0, results=results)


def _text(value):
    return None if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _entry(name, value, source, read_only=False):
    sensitive = is_sensitive(name)  # a password: Kafka answers null and is_sensitive
    text = None if sensitive else _text(value)
    return {"name": name, "value": text, "read_only": read_only, "config_source": source, "is_sensitive": sensitive,
            "synonyms": [], "config_type": 0, "documentation": None}


def _topic_configs(ctx, topic, keys, synonyms: bool):
    info = ctx.manager.topic(topic)
    effective = ctx.manager.config_for(topic).to_props()
    out = []
    for name, value in effective.items():
        if keys is not None and name not in keys:
            continue
        found = _sources(ctx, info, name)
        entry = _entry(name, value, found[0][2])
        if synonyms:
            entry["synonyms"] = [{"name": n, "value": _text(v), "source": src} for n, v, src in found]
        out.append(entry)
    return out


def _sources(ctx, info, name):
    """(name, value, source) of a topic config's value at each level that has one, the winner first."""
    found = []
    if name in info.config:
        found.append((name, info.config[name], DYNAMIC_TOPIC_CONFIG))
    broker = BROKER_NAME.get(name)
    if broker is not None:
        value, default = ctx.config.values.get(broker), BROKER_SETTINGS[broker].default
        if value is not None and value != default:
            found.append((broker, value, STATIC_BROKER_CONFIG))
        found.append((broker, default, DEFAULT_CONFIG))
    else:
        found.append((name, ctx.manager.defaults.to_props()[name], DEFAULT_CONFIG))
    return found


def _broker_configs(ctx, keys):
    return [
        _entry(name, value, STATIC_BROKER_CONFIG, read_only=True)
        for name, value in sorted(ctx.config.values.items())
        if (keys is None or name in keys) and value is not None
    ]
