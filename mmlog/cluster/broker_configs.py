"""IncrementalAlterConfigs / AlterConfigs of a broker: the dynamic configs a request leaves, checked as Kafka checks.

A broker resource names one broker (its id: only this broker's own, else INVALID_REQUEST
"Unexpected broker id, expected 0, but received 1", as Kafka's ZkAdminManager answers)
or, with the empty name, the cluster-wide default. AlterConfigs replaces that level's
dynamic configs; IncrementalAlterConfigs changes them one operation at a time (see
`topic_configs.apply_changes`). A name that is no broker setting is INVALID_CONFIG; one
that only takes effect at start is INVALID_CONFIG "Cannot update these configs
dynamically: ..." (Kafka's words, `config/dynamic.py` holds the table); a value is parsed
by the setting's own rule, and the topic defaults it makes must hold together. A
resource refused changes nothing.
"""

from __future__ import annotations

from typing import Iterable

from mmlog.cluster.topic_configs import apply_changes
from mmlog.config.broker import BROKER_SETTINGS
from mmlog.config.dynamic import DEFAULT, not_dynamic, topic_defaults
from mmlog.config.settings import ConfigError, LogConfig
from mmlog.errors import InvalidConfig, InvalidRequest

LIST_CONFIGS = {"log.cleanup.policy", "max.connections.per.ip.overrides"}


def level_of(resource_name: str, broker_id: int) -> str:
    """The stored level a broker resource name means: DEFAULT for "", else this broker's id."""
    if resource_name == "":
        return DEFAULT
    try:
        wanted = int(resource_name)
    except ValueError:
        raise InvalidRequest(f"Broker id must be an integer, but it is: {resource_name}") from None
    if wanted != broker_id:
        raise InvalidRequest(f"Unexpected broker id, expected {broker_id}, but received {resource_name}")
    return str(broker_id)


def altered(current: dict[str, str], changes: Iterable[tuple[str, int, str | None]], incremental: bool,
            static: dict, static_defaults: LogConfig) -> dict[str, str]:
    """One level's dynamic configs after `changes`; `static`: the broker's server.properties values."""
    changes = list(changes)
    unknown = [name for name, _, _ in changes if name not in BROKER_SETTINGS]
    if unknown:
        raise InvalidConfig(f"Unknown broker config name: {', '.join(unknown)}")
    fixed = not_dynamic(name for name, _, _ in changes)
    if fixed:
        raise InvalidConfig(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    out = apply_changes(current, changes, incremental, LIST_CONFIGS,
                        lambda name: str(current.get(name, static.get(name)) or ""))
    try:
        for name, value in out.items():
            BROKER_SETTINGS[name].parse(value)
        LogConfig.from_props(topic_defaults(out), static_defaults)
    except ConfigError as exc:
        raise InvalidConfig(str(exc)) from exc
    return out
