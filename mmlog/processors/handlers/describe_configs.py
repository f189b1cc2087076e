"""DescribeConfigs (32): a topic's effective configuration (Kafka names), or a broker's.

Each config says where its value comes from, as Kafka does: DYNAMIC_TOPIC_CONFIG (a
topic override set at creation or by AlterConfigs), DYNAMIC_BROKER_CONFIG (this broker's
dynamic config, `config/dynamic.py`), DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide
dynamic default), STATIC_BROKER_CONFIG (server.properties sets it, e.g. log.retention.ms,
to other than its default) or DEFAULT_CONFIG. With include_synonyms (v1+) each config
lists every level that sets it, the winning one first: the topic override, then the
broker setting's levels in that order (with its aliases, log.retention.hours...).
A broker's settings are read_only unless they can change dynamically; the broker
resource "" describes the cluster default's dynamic configs.
"""

from mmlog.config.broker import BROKER_SETTINGS, is_sensitive
from mmlog.config.dynamic import DYNAMIC, levels
from mmlog.config.settings import BROKER_ALIASES, BROKER_TOPIC_DEFAULTS, LogConfig, attr_name
from mmlog.errors import InvalidRequest
from mmlog.processors.handlers._common import error_code
from mmlog.protocol.messages import describe_configs as schema
from mmlog.processors.handlers._common import config_refusal
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
TOPIC, BROKER = 2, 4
# config_source values (DescribeConfigsResponse.json)
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = \
    1, 2, 3, 4, 5
INVALID_REQUEST = 42
BROKER_NAME = {topic: broker for broker, topic in BROKER_TOPIC_DEFAULTS.items()}  # retention.ms -> log.retention.ms


def handle(ctx: HandlerContext, request):
    ctx.manager.reload()  # one stat: an AlterConfigs answered by another processor shows at once
    results = []
    for res in request.body.resources:
        result = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                  "resource_name": res.resource_name, "configs": []}
        try:
            refusal = config_refusal(ctx, request.conn, acls.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
            if refusal:
                result.update(error_code=refusal, error_message="not authorized to describe its configs")
            elif res.resource_type == TOPIC:
                result["configs"] = _topic_configs(ctx, res.resource_name, res.configuration_keys,
                                                   request.version >= 1 and request.body.include_synonyms)
            elif res.resource_type == BROKER:
                result["configs"] = _broker_configs(ctx, res.resource_name, res.configuration_keys,
                                                    request.version >= 1 and request.body.include_synonyms)
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


def _topic_configs(ctx: HandlerContext, topic, keys, synonyms: bool):
    return topic_configs(ctx, ctx.manager.topic(topic).config, keys, synonyms)


def topic_configs(ctx: HandlerContext, overrides: dict, keys=None, synonyms: bool = False) -> list[dict]:
    """The configs of a topic with these overrides, each with its source (CreateTopics v5+ answers them too)."""
    defaults = ctx.manager.defaults.to_props()
    effective = LogConfig.from_props(overrides, ctx.manager.defaults).to_props()
    at_levels = _Levels(ctx)
    out = []
    for name, value in effective.items():
        if keys is not None and name not in keys:
            continue
        found = [(name, overrides[name], DYNAMIC_TOPIC_CONFIG)] if name in overrides else []
        broker = BROKER_NAME.get(name)
        found += at_levels.synonyms(broker) if broker is not None else [(name, defaults[name], DEFAULT_CONFIG)]
        entry = _entry(name, value, found[0][2])
        if synonyms:
            entry["synonyms"] = [{"name": n, "value": _text(v), "source": src} for n, v, src in found]
        out.append(entry)
    return out


_BUILTIN = {n: s.default for n, s in BROKER_SETTINGS.items() if s.default is not None}
_NAMES = {name: [name] + [alias for alias, (target, _) in BROKER_ALIASES.items() if target == name]
          for name in BROKER_SETTINGS}  # a broker setting and its aliases (log.retention.ms, .minutes, .hours)


class _Levels:
    """The broker settings set at each level, read once per request: this broker's dynamic configs, the
    cluster default's, server.properties (where it differs from the default), the built-in defaults."""

    def __init__(self, ctx: HandlerContext) -> None:
        mine, default = levels(ctx.manager.dynamic.get("brokers", {}), ctx.config["broker.id"])
        static = {n: v for n, v in ctx.config.values.items()
                  if v is not None and n in BROKER_SETTINGS and v != BROKER_SETTINGS[n].default}
        self.levels = ((DYNAMIC_BROKER_CONFIG, mine), (DYNAMIC_DEFAULT_BROKER_CONFIG, default),
                       (STATIC_BROKER_CONFIG, static), (DEFAULT_CONFIG, _BUILTIN))

    def synonyms(self, name: str) -> list[tuple]:
        """(name, value, source) of a broker setting and its aliases at every level that sets them, as Kafka's
        ConfigHelper orders them: by level, then by name; entries before the first of `name` itself dropped."""
        names = _NAMES.get(name, [name])
        found = [(n, values[n], source) for source, values in self.levels for n in names if n in values]
        while found and found[0][0] != name:
            found.pop(0)
        return found


def _broker_configs(ctx: HandlerContext, resource_name, keys, synonyms: bool):
    """A broker's settings with their sources; the empty name: the cluster default's dynamic configs."""
    if resource_name == "":
        _, default = levels(ctx.manager.dynamic.get("brokers", {}), ctx.config["broker.id"])
        return [_entry(n, v, DYNAMIC_DEFAULT_BROKER_CONFIG) for n, v in sorted(default.items())
                if keys is None or n in keys]
    if resource_name != str(ctx.config["broker.id"]):
        raise InvalidRequest(f"Unexpected broker id, expected {ctx.config['broker.id']} or empty string, but "
                             f"received {resource_name}")
    defaults = ctx.manager.defaults
    at_levels = _Levels(ctx)
    out = []
    for name in sorted(BROKER_SETTINGS):
        if keys is not None and name not in keys:
            continue
        found = at_levels.synonyms(name)
        if name in BROKER_TOPIC_DEFAULTS:  # what partitions use: the aliases already folded in
            value = getattr(defaults, attr_name(BROKER_TOPIC_DEFAULTS[name]))
        elif found:
            value = found[0][1]
        else:
            continue  # an alias set nowhere (log.retention.hours)
        entry = _entry(name, value, found[0][2] if found else DEFAULT_CONFIG, read_only=name not in DYNAMIC)
        if synonyms:
            entry["synonyms"] = [{"name": n, "value": _text(v), "source": src} for n, v, src in found]
        out.append(entry)
    return out
