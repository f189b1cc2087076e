"""Dynamic broker configs: the broker settings that change without a restart, and how they apply.

Kafka keeps dynamic broker configs at two levels: one broker's (`/config/brokers/<id>`)
and the cluster-wide default (`/config/brokers/<default>`); a setting's value is the
first of: this broker's dynamic value, the cluster default, server.properties, the
built-in default (Kafka's DynamicBrokerConfig; DescribeConfigs lists the synonyms in
that order). mmlog keeps the same two levels, in ZooKeeper in cluster mode and in the
topic catalogue standalone (`log/catalogue.py`), as `{"<default>": {...}, "<id>": {...}}`.

`DYNAMIC` is the one table of what may change, and how each change reaches the code
that reads it:

- `topic-default`: the broker-level default of a topic config (log.retention.ms,
  log.segment.bytes, log.flush.*, log.cleanup.policy, min.insync.replicas, ...).
  The log manager derives every partition's `LogConfig` from these again, in the
  main process at once and in each processor within `CATALOGUE_CHECK_S` (the path
  altered topic configs take): retention, flush and roll timers, the cleaner, the
  append checks. `unclean.leader.election.enable` also reaches the controller.
- `connections`: max.connections, max.connections.per.ip(.overrides), which the
  supervisor reads on every accept.
- `replication`: follower.replication.throttled.rate, which the replica fetcher
  applies to the replicas its topics' follower.replication.throttled.replicas name
  (through the fetch plan), and leader.replication.throttled.rate, which processors
  apply to follower fetches of the replicas leader.replication.throttled.replicas
  names (read with the catalogue, as quotas are; `config/throttled_replicas.py`).

Anything else (log.dirs, listeners, num.network.threads, ...) is read at start only:
a change is refused, as Kafka refuses it, with INVALID_CONFIG "Cannot update these
configs dynamically: ...", never stored and ignored.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from mmlog.config.settings import BROKER_ALIASES, BROKER_TOPIC_DEFAULTS

DEFAULT = "<default>"  # the cluster-wide level's name in ZooKeeper and the catalogue

TOPIC_DEFAULT, CONNECTIONS, REPLICATION = "topic-default", "connections", "replication"
DYNAMIC: dict[str, str] = {
    **{name: TOPIC_DEFAULT for name in BROKER_TOPIC_DEFAULTS},
    **{alias: TOPIC_DEFAULT for alias in BROKER_ALIASES},  # log.retention.hours/minutes, log.roll.hours
    "max.connections": CONNECTIONS,
    "max.connections.per.ip": CONNECTIONS,
    "max.connections.per.ip.overrides": CONNECTIONS,
    "follower.replication.throttled.rate": REPLICATION,
    "leader.replication.throttled.rate": REPLICATION,
}


def not_dynamic(names: Iterable[str]) -> list[str]:
    """The names of `names` that only take effect at start."""
    return sorted(n for n in names if n not in DYNAMIC)


def levels(dynamic: Mapping[str, Mapping[str, str]], broker_id: int) -> tuple[dict, dict]:
    """(this broker's dynamic configs, the cluster default's) from the stored `{level: {name: value}}`."""
    return dict(dynamic.get(str(broker_id), {})), dict(dynamic.get(DEFAULT, {}))


def merged(dynamic: Mapping[str, Mapping[str, str]], broker_id: int) -> dict[str, str]:
    """The dynamic values in force on this broker: the cluster default, overlaid by the broker's own."""
    mine, default = levels(dynamic, broker_id)
    return {**default, **mine}


def topic_defaults(values: Mapping[str, str]) -> dict[str, str]:
    """Topic-level props (Kafka topic names) that dynamic broker values set: log.retention.hours=2 gives
    retention.ms=7200000 unless log.retention.ms is set at the same time (Kafka's precedence)."""
    out: dict[str, str] = {}
    for alias, (target, scale) in BROKER_ALIASES.items():
        if alias in values and target not in values:
            amount = int(values[alias])
            out[BROKER_TOPIC_DEFAULTS[target]] = str(amount * scale if amount >= 0 else -1)
    for name, value in values.items():
        if name in BROKER_TOPIC_DEFAULTS:
            out[BROKER_TOPIC_DEFAULTS[name]] = str(value)
    return out
