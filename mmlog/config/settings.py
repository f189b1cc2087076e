"""A typed settings registry: one entry per setting, driving files, flags and docs.

Names are Kafka's own (`server.properties` for the broker, topic-level configs for
topics) wherever mmlog has the same setting, so an operator's Kafka knowledge
carries over. Every value is parsed and validated here; an unknown name or a bad
value raises `ConfigError` naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Callable, Mapping

from mmlog.config import throttled_replicas

DAY_MS = 24 * 3600 * 1000


class ConfigError(ValueError):
    """An unknown setting, or a value that does not parse or validate."""


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def _int(text: str) -> int:
    return int(str(text).strip().replace("_", ""))


def _str(text: str) -> str:
    return str(text).strip()


def _float(text: str) -> float:
    return float(str(text).strip().replace("_", ""))


PARSERS: dict[type, Callable[[str], Any]] = {bool: _bool, int: _int, str: _str, float: _float}


@dataclass(frozen=True)
class Setting:
    """One setting: its Kafka name, type, default, validator and one-line doc."""

    name: str
    type: type
    default: Any
    doc: str
    check: Callable[[Any], bool] = lambda v: True
    rule: str = ""
    flag: str | None = None  # command-line flag, for broker settings that have one

    def parse(self, raw: Any) -> Any:
        """Parse and validate a raw value (string from a file or flag, or a typed value)."""
        try:
            if isinstance(raw, self.type) and not isinstance(raw, bool) or type(raw) is self.type:
                value = raw
            elif self.type is float and isinstance(raw, int) and not isinstance(raw, bool):
                value = float(raw)
            else:
                value = PARSERS[self.type](raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self.name}: {raw!r} is not a valid {self.type.__name__}") from exc
        if not self.check(value):
            raise ConfigError(f"{self.name}: {value!r} is invalid ({self.rule})")
        return value


def _positive(v: int) -> bool:
    return v > 0


def _non_negative(v: int) -> bool:
    return v >= 0


def _minus_one_or_positive(v: int) -> bool:
    return v == -1 or v > 0


CLEANUP_POLICIES = ("delete", "compact")


def cleanup_policies(value: str) -> set[str]:
    """The policies of a cleanup.policy value ('compact,delete' -> {'compact', 'delete'})."""
    return {p.strip() for p in str(value).split(",") if p.strip()}


def _cleanup_policy_ok(value: str) -> bool:
    policies = cleanup_policies(value)
    return bool(policies) and policies <= set(CLEANUP_POLICIES)


_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

# Topic-level settings (`kafka-configs --entity-type topics`), with the broker
# setting that supplies each default.
TOPIC_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("segment.bytes", int, 1 << 30, "Roll the active segment once it holds this many bytes.",
                lambda v: 14 <= v <= 2**31 - 1, "14 .. 2^31-1"),
        Setting("segment.ms", int, 7 * DAY_MS, "Roll the active segment once it is this old (ms).", _positive, "> 0"),
        Setting("segment.index.bytes", int, 10 << 20, "Preallocated size of each offset and time index file.",
                lambda v: v >= 16, ">= 16"),
        Setting("index.interval.bytes", int, 4096,
                "Bytes of log between sparse index entries: a lookup then scans at most this much.",
                _non_negative, ">= 0"),
        Setting("flush.messages", int, 2**63 - 1, "fsync the log after this many messages.", _positive, "> 0"),
        Setting("flush.ms", int, 2**63 - 1, "fsync the log when the oldest unflushed message is this old (ms).",
                _non_negative, ">= 0"),
        Setting("retention.ms", int, 7 * DAY_MS, "Delete whole segments whose newest record is older (ms); -1 keeps all.",
                lambda v: v >= -1, ">= -1"),
        Setting("retention.bytes", int, -1, "Delete old segments while the partition is larger; -1 is off.",
                lambda v: v >= -1, ">= -1"),
        Setting("cleanup.policy", str, "delete", "delete (retention by time and size), compact (the log cleaner "
                "keeps the last record of each key, mmlog/log/cleaner/cleaner.py) or compact,delete (both).",
                _cleanup_policy_ok, "delete, compact or compact,delete"),
        Setting("min.cleanable.dirty.ratio", float, 0.5, "Clean a compacted log once this share of it is dirty "
                "(written since its last cleaning).", lambda v: 0 <= v <= 1, "0 .. 1"),
        Setting("min.compaction.lag.ms", int, 0, "A record stays uncompacted at least this long after it is "
                "written (ms).", _non_negative, ">= 0"),
        Setting("max.compaction.lag.ms", int, 2**63 - 1, "A record is compacted at most this long after it is "
                "written, whatever the dirty ratio (ms).", _positive, "> 0"),
        Setting("delete.retention.ms", int, DAY_MS, "How long a tombstone (null value) stays after the "
                "segment holding it is cleaned: a consumer starting within it sees the delete (ms).",
                _non_negative, ">= 0"),
        Setting("max.message.bytes", int, 1048588, "Largest record batch a producer may append.",
                _positive, "> 0"),
        Setting("message.timestamp.type", str, "CreateTime", "CreateTime (LogAppendTime is not supported).",
                lambda v: v == "CreateTime", "CreateTime"),
        Setting("compression.type", str, "producer",
                "Codec of stored batches: producer keeps the client's (no recompression), or one of "
                "uncompressed, gzip, snappy, lz4, zstd that other batches are recompressed to on append.",
                lambda v: v in _COMPRESSION_TYPES, "|".join(_COMPRESSION_TYPES)),
        Setting("compression.gzip.level", int, 6, "gzip level of batches the broker recompresses.",
                lambda v: 1 <= v <= 9, "1 .. 9"),
        Setting("compression.lz4.level", int, 9, "lz4 level of batches the broker recompresses.",
                lambda v: 1 <= v <= 17, "1 .. 17"),
        Setting("compression.zstd.level", int, 3, "zstd level of batches the broker recompresses.",
                lambda v: -131072 <= v <= 22, "-131072 .. 22"),
        Setting("min.insync.replicas", int, 1, "In-sync replicas an acks=all produce needs (else "
                "NOT_ENOUGH_REPLICAS).", _positive, ">= 1"),
        Setting("unclean.leader.election.enable", bool, False, "Elect a replica outside the ISR when every ISR "
                "member is dead (losing what only they held) rather than leave the partition offline."),
        Setting(throttled_replicas.LEADER, str, "", "Replicas (partition:broker, or *) whose leader slows their "
                "out-of-sync followers' fetches to leader.replication.throttled.rate.", throttled_replicas.valid,
                throttled_replicas.RULE),
        Setting(throttled_replicas.FOLLOWER, str, "", "Replicas (partition:broker, or *) that copy the leader at "
                "most at their broker's follower.replication.throttled.rate while out of sync.",
                throttled_replicas.valid, throttled_replicas.RULE),
    ]
}

# Broker settings whose values supply topic defaults: broker name -> topic name.
BROKER_TOPIC_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

# Kafka's coarser aliases: a broker setting in other units that maps to a topic setting.
BROKER_ALIASES = {
    "log.roll.hours": ("log.roll.ms", 3600 * 1000),
    "log.retention.hours": ("log.retention.ms", 3600 * 1000),
    "log.retention.minutes": ("log.retention.ms", 60 * 1000),
}


@dataclass(frozen=True)
class LogConfig:
    """The effective topic-level configuration of one partition log."""

    segment_bytes: int = TOPIC_SETTINGS["segment.bytes"].default
    segment_ms: int = TOPIC_SETTINGS["segment.ms"].default
    segment_index_bytes: int = TOPIC_SETTINGS["segment.index.bytes"].default
    index_interval_bytes: int = TOPIC_SETTINGS["index.interval.bytes"].default
    flush_messages: int = TOPIC_SETTINGS["flush.messages"].default
    flush_ms: int = TOPIC_SETTINGS["flush.ms"].default
    retention_ms: int = TOPIC_SETTINGS["retention.ms"].default
    retention_bytes: int = TOPIC_SETTINGS["retention.bytes"].default
    cleanup_policy: str = TOPIC_SETTINGS["cleanup.policy"].default
    min_cleanable_dirty_ratio: float = TOPIC_SETTINGS["min.cleanable.dirty.ratio"].default
    min_compaction_lag_ms: int = TOPIC_SETTINGS["min.compaction.lag.ms"].default
    max_compaction_lag_ms: int = TOPIC_SETTINGS["max.compaction.lag.ms"].default
    delete_retention_ms: int = TOPIC_SETTINGS["delete.retention.ms"].default
    max_message_bytes: int = TOPIC_SETTINGS["max.message.bytes"].default
    message_timestamp_type: str = TOPIC_SETTINGS["message.timestamp.type"].default
    compression_type: str = TOPIC_SETTINGS["compression.type"].default
    compression_gzip_level: int = TOPIC_SETTINGS["compression.gzip.level"].default
    compression_lz4_level: int = TOPIC_SETTINGS["compression.lz4.level"].default
    compression_zstd_level: int = TOPIC_SETTINGS["compression.zstd.level"].default
    min_insync_replicas: int = TOPIC_SETTINGS["min.insync.replicas"].default
    unclean_leader_election_enable: bool = TOPIC_SETTINGS["unclean.leader.election.enable"].default
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    # Derived values, computed once per config (every append asks for them). cached_property
    # writes the instance __dict__ directly, which a frozen dataclass allows.
    @cached_property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy has compact)."""
        return "compact" in cleanup_policies(self.cleanup_policy)

    @cached_property
    def delete(self) -> bool:
        """Whether retention deletes old segments (cleanup.policy has delete)."""
        return "delete" in cleanup_policies(self.cleanup_policy)

    @cached_property
    def compression_level(self) -> int | None:
        """The level for compression.type's codec (None where it has none)."""
        return getattr(self, f"compression_{self.compression_type}_level", None)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Overlay topic-level props (Kafka names) on base (or the defaults)."""
        base = base or cls()
        values = {f.name: getattr(base, f.name) for f in fields(cls)}
        for name, raw in props.items():
            setting = TOPIC_SETTINGS.get(name)
            if setting is None:
                raise ConfigError(f"unknown topic config {name!r}")
            values[attr_name(name)] = setting.parse(raw)
        return cls(**values)

    def to_props(self) -> dict[str, Any]:
        """The config as Kafka-named topic props."""
        return {name: getattr(self, attr_name(name)) for name in TOPIC_SETTINGS}


def attr_name(kafka_name: str) -> str:
    """'segment.bytes' -> 'segment_bytes'."""
    return kafka_name.replace(".", "_")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (key=value or key: value, # and ! comments, \\ continuations)."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1 :].strip()
                break
        else:
            key, value = line.strip(), ""
        props[key] = value
    if pending:
        key, _, value = pending.partition("=")
        props[key.strip()] = value.strip()
    return props
