"""IncrementalAlterConfigs / AlterConfigs of a topic: the overrides a request leaves, checked as Kafka checks.

AlterConfigs replaces a topic's overrides with the request's set; IncrementalAlterConfigs
changes them one operation at a time: SET (0), DELETE (1, back to the default), APPEND
(2) and SUBTRACT (3), the last two only for list-valued configs (cleanup.policy).
Every name must be a topic config (INVALID_CONFIG "Unknown topic config name: x", as
Kafka's LogConfig.validateNames says) and the result must parse (INVALID_CONFIG with
the setting's rule, the same words as at CreateTopics). A resource refused changes
nothing.
"""

from __future__ import annotations

from typing import Callable, Iterable

from mmlog.config import throttled_replicas
from mmlog.config.settings import TOPIC_SETTINGS, ConfigError, LogConfig
from mmlog.errors import InvalidConfig, InvalidRequest

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = {"cleanup.policy", throttled_replicas.LEADER, throttled_replicas.FOLLOWER}  # Kafka's LIST-typed ones


def altered(current: dict[str, str], changes: Iterable[tuple[str, int, str | None]], incremental: bool,
            defaults: LogConfig) -> dict[str, str]:
    """The topic's overrides after `changes` ((name, operation, value); operation ignored unless incremental)."""
    changes = list(changes)
    for name, _, _ in changes:
        if name not in TOPIC_SETTINGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
    out = apply_changes(current, changes, incremental, LIST_CONFIGS,
                        lambda name: str(getattr(defaults, name.replace(".", "_"))))
    try:
        LogConfig.from_props(out, defaults)
    except ConfigError as exc:
        raise InvalidConfig(str(exc)) from exc
    return out


def apply_changes(current: dict[str, str], changes: list[tuple[str, int, str | None]], incremental: bool,
                  list_configs: set[str], value_of: Callable[[str], str]) -> dict[str, str]:
    """Overrides after AlterConfigs (the request's set replaces them) or IncrementalAlterConfigs operations,
    of topics or brokers; `value_of(name)`: the value a list config has without an override."""
    names = [name for name, _, _ in changes]
    if len(set(names)) != len(names):
        raise InvalidRequest("Error due to duplicate config keys")
    if not incremental:
        return {name: str(value) for name, _, value in changes if value is not None}
    out = dict(current)
    for name, op, value in changes:
        if op == SET:
            if value is None:
                raise InvalidRequest(f"Null value not supported for : {name}")
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in list_configs:
                verb = "append" if op == APPEND else "subtract"
                raise InvalidConfig(f"Config value {verb} is not allowed for config key: {name}")
            items = [v for v in out.get(name, value_of(name)).split(",") if v]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            items = items + [v for v in given if v not in items] if op == APPEND else \
                [v for v in items if v not in given]
            out[name] = ",".join(items)
        else:
            raise InvalidRequest(f"Unknown config operation {op} for {name}")
    return {k: str(v) for k, v in out.items()}
