"""The log manager: the topics and partition logs of a broker's data directories.

Layout: each data directory (`log.dirs`) holds partition directories
`<topic>-<partition>/`; new partitions go to the directory holding the fewest.
The topic catalogue (partition counts, per-topic config overrides, topic ids) is
`topics.json` in the first data directory, written atomically by the one process
that owns the manager (the broker's control plane). Other processes open the
manager attached: they read the catalogue, reload it when asked about a topic they
do not know, and open partitions without recovery.

In cluster mode a topic's partitions are spread over the brokers: its catalogue
entry carries the `assignment` (broker id per partition) and this broker opens only
the partitions assigned to it (`broker_id`); asking for another one is
NOT_LEADER_OR_FOLLOWER. A standalone broker's topics have no assignment: every
partition is here, led alone. A replica in cluster mode is created without a role
(appends refused) until the control plane applies its partition state.

Deleting a topic removes it from the catalogue first, then marks each partition
deleted (every process sees that through the partition state) and removes its
directory; a crash in between leaves directories that `load()` removes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from mmlog.config.settings import ConfigError, LogConfig
from mmlog.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    NotLeaderOrFollower,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from mmlog.log import kernels, offset_checkpoint
from mmlog.log.files import atomic_write, file_stamp
from mmlog.log.partition import Partition
from mmlog.log.state import Role

CATALOGUE = "topics.json"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")


@dataclass
class TopicInfo:
    """A topic in the catalogue."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)  # overrides only, Kafka names
    topic_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    assignment: list[list[int]] | None = None  # replicas per partition (cluster mode); None: all here, alone

    def __post_init__(self) -> None:
        if self.assignment is not None:  # catalogues before replication held one broker id per partition
            self.assignment = [[r] if isinstance(r, int) else list(r) for r in self.assignment]

    def to_json(self) -> dict:
        doc = {"partitions": self.partitions, "config": self.config, "id": self.topic_id}
        if self.assignment is not None:
            doc["assignment"] = self.assignment
        return doc

    def replicas(self, partition: int, standalone_id: int) -> list[int]:
        """The brokers holding a partition, its preferred leader first."""
        return [standalone_id] if self.assignment is None else self.assignment[partition]

    def hosted(self, broker_id: int | None) -> list[int]:
        """The partitions with a replica on broker_id (all of them for a standalone topic)."""
        if self.assignment is None or broker_id is None:
            return list(range(self.partitions))
        return [p for p, replicas in enumerate(self.assignment) if broker_id in replicas]


def validate_topic_name(name: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not _LEGAL_TOPIC.match(name or "") or name in (".", ".."):
        raise InvalidTopic(f"illegal topic name {name!r}")


class LogManager:
    """Topics and their partition logs across one or more data directories."""

    def __init__(self, log_dirs: list[Path] | Path, defaults: LogConfig | None = None, *, owner: bool = True,
                 broker_id: int | None = None) -> None:
        self.log_dirs = [Path(d) for d in (log_dirs if isinstance(log_dirs, list) else [log_dirs])]
        self.defaults = defaults or LogConfig()
        self.owner = owner
        self.broker_id = broker_id
        self._topics: dict[str, TopicInfo] = {}
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._lock = threading.RLock()
        self._catalogue_stamp: tuple[int, int, int] | None = None
        if owner:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
            kernels.warm()
        self.reload()

    # ------------------------------------------------------------ catalogue

    @property
    def catalogue_path(self) -> Path:
        return self.log_dirs[0] / CATALOGUE

    def reload(self) -> None:
        """Read the catalogue again if it changed (attached processes call this on a miss)."""
        stamp = file_stamp(self.catalogue_path)
        if stamp is None or stamp == self._catalogue_stamp:
            return
        data = json.loads(self.catalogue_path.read_text())
        with self._lock:
            before = {name: t.topic_id for name, t in self._topics.items()}
            self._topics = {
                name: TopicInfo(name, t["partitions"], dict(t.get("config", {})), t.get("id", ""),
                                t.get("assignment"))
                for name, t in data.get("topics", {}).items()
            }
            for key in [k for k in self._partitions
                        if k[0] not in self._topics or self._topics[k[0]].topic_id != before.get(k[0])]:
                self._partitions.pop(key).close(clean=False)
            self._catalogue_stamp = stamp

    def _save(self) -> None:
        data = {"version": 1, "topics": {n: t.to_json() for n, t in sorted(self._topics.items())}}
        atomic_write(self.catalogue_path, json.dumps(data, indent=1).encode())
        self._catalogue_stamp = file_stamp(self.catalogue_path)

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            self.reload()
            info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    def config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic(topic).config, self.defaults)

    # ------------------------------------------------------------ admin (owner only)

    def validate_topic(self, name: str, partitions: int, config: Mapping[str, str] | None = None) -> dict[str, str]:
        """Check a new topic's name, partition count and overrides; returns the overrides as strings."""
        validate_topic_name(name)
        if partitions < 1:
            raise InvalidPartitions(f"{partitions} partitions: a topic needs at least one")
        overrides = {k: str(v) for k, v in (config or {}).items()}
        try:
            LogConfig.from_props(overrides, self.defaults)
        except ConfigError as exc:
            raise InvalidConfig(str(exc)) from exc
        return overrides

    def create_topic(self, name: str, partitions: int, config: Mapping[str, str] | None = None, *,
                     assignment: list[int] | None = None, topic_id: str | None = None) -> TopicInfo:
        """Create a topic and the directories of its partitions that live here."""
        self._require_owner()
        overrides = self.validate_topic(name, partitions, config)
        log_config = LogConfig.from_props(overrides, self.defaults)
        with self._lock:
            if name in self._topics:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            info = TopicInfo(name, partitions, overrides, topic_id or uuid.uuid4().hex, assignment)
            for p in info.hosted(self.broker_id):
                part = self._partitions[(name, p)] = Partition(self._place(name, p), log_config,
                                                               broker_id=self.broker_id or 0)
                if assignment is None:
                    self._lead_alone(part)
                else:
                    part.stop_serving(info.assignment[p])
            self._topics[name] = info
            self._save()
            return info

    def delete_topic(self, name: str) -> None:
        self._require_owner()
        with self._lock:
            info = self.topic(name)
            del self._topics[name]
            self._save()
            for p in info.hosted(self.broker_id):
                part = self._partitions.pop((name, p), None) or self._open(name, p)
                part.delete()

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace a topic's overrides; open partitions pick the new config up at once here."""
        self._require_owner()
        with self._lock:
            info = self.topic(name)
            try:
                log_config = LogConfig.from_props(config, self.defaults)
            except ConfigError as exc:
                raise InvalidConfig(str(exc)) from exc
            info.config = {k: str(v) for k, v in config.items()}
            self._save()
            for (topic, _), part in self._partitions.items():
                if topic == name:
                    part.config = log_config

    def _require_owner(self) -> None:
        if not self.owner:
            raise RuntimeError("topic admin runs in the process that owns the log manager")

    # ------------------------------------------------------------ partitions

    def partition(self, topic: str, partition: int) -> Partition:
        """The open partition log (opened on first use)."""
        part = self._partitions.get((topic, partition))
        if part is not None:
            return part
        info = self.topic(topic)
        if not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartition(f"{topic} has no partition {partition}")
        if self.broker_id is not None and self.broker_id not in (replicas := info.replicas(partition, self.broker_id)):
            raise NotLeaderOrFollower(f"{topic}-{partition} lives on brokers {replicas}")
        with self._lock:
            part = self._partitions.get((topic, partition)) or self._open(topic, partition)
            self._partitions[(topic, partition)] = part
            return part

    def _open(self, topic: str, partition: int) -> Partition:
        directory = self._find(topic, partition)
        if directory is None:
            if not self.owner:
                raise UnknownTopicOrPartition(f"{topic}-{partition} has no directory yet")
            directory = self._place(topic, partition)
        checkpoint_hw = self._checkpoints(directory.parent).get((topic, partition)) if self.owner else None
        part = Partition(directory, self.config_for(topic), recover=self.owner, checkpoint_hw=checkpoint_hw,
                         broker_id=self.broker_id or 0)
        if self.owner and self._topics[topic].assignment is None:
            self._lead_alone(part)
        return part

    def _lead_alone(self, part: Partition) -> None:
        """A standalone partition: this broker leads it in epoch 0 with an ISR of itself (HW = LEO)."""
        me = (self.broker_id or 0,)
        rep = part.replication()
        if ((rep.role, rep.leader_epoch, rep.replicas, rep.isr) != (Role.LEADER, 0, me, me) or part.latest_epoch() < 0
                or part.high_watermark != part.log_end_offset):
            part.become_leader(0, me, me, 0)

    def _checkpoints(self, log_dir: Path) -> dict[tuple[str, int], int]:
        """The log dir's replication-offset-checkpoint, read once per manager."""
        cache = self.__dict__.setdefault("_checkpoint_cache", {})
        if log_dir not in cache:
            cache[log_dir] = offset_checkpoint.read(log_dir / offset_checkpoint.HIGH_WATERMARKS)
        return cache[log_dir]

    def checkpoint_high_watermarks(self) -> None:
        """Write each log dir's replication-offset-checkpoint from the open partitions (owner only)."""
        self._require_owner()
        per_dir: dict[Path, dict] = {d: {} for d in self.log_dirs}
        for (topic, p), part in list(self._partitions.items()):
            try:
                per_dir.setdefault(part.directory.parent, {})[topic, p] = part.high_watermark
            except UnknownTopicOrPartition:
                continue  # deleted meanwhile
        for log_dir, entries in per_dir.items():
            offset_checkpoint.write(log_dir / offset_checkpoint.HIGH_WATERMARKS, entries)

    def _find(self, topic: str, partition: int) -> Path | None:
        for d in self.log_dirs:
            candidate = d / f"{topic}-{partition}"
            if candidate.is_dir():
                return candidate
        return None

    def _place(self, topic: str, partition: int) -> Path:
        """Existing directory of a partition, or a new one in the emptiest data dir."""
        found = self._find(topic, partition)
        if found is not None:
            return found
        counts = {d: sum(1 for e in os.scandir(d) if e.is_dir()) for d in self.log_dirs}
        return min(self.log_dirs, key=lambda d: counts[d]) / f"{topic}-{partition}"

    def load(self) -> list[str]:
        """Owner start-up: open (recovering as needed) every partition of the catalogue.

        Returns the recovery notes. Directories of deleted topics are removed.
        """
        self._require_owner()
        notes = []
        for d in self.log_dirs:
            for entry in os.scandir(d):
                if not entry.is_dir():
                    continue
                if entry.name.endswith("-delete"):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                m = _PARTITION_DIR.match(entry.name)
                if m and m["topic"] not in self._topics:
                    shutil.rmtree(entry.path, ignore_errors=True)  # a deletion cut short
        for name, info in self._topics.items():
            for p in info.hosted(self.broker_id):
                part = self.partition(name, p)
                notes += part.recovered_notes
                if info.assignment is not None:  # the role it had before the restart is stale until the
                    part.stop_serving(info.assignment[p])  # control plane applies ZooKeeper's state
        return notes

    def partitions(self) -> Iterator[tuple[str, int, Partition]]:
        for (topic, p), part in list(self._partitions.items()):
            yield topic, p, part

    # ------------------------------------------------------------ housekeeping

    def apply_retention(self) -> int:
        return sum(part.apply_retention() for _, _, part in self.partitions())

    def flush_due(self) -> int:
        return sum(part.maybe_flush() for _, _, part in self.partitions())

    def roll_due(self) -> int:
        return sum(part.maybe_roll() for _, _, part in self.partitions())

    def close(self, clean: bool | None = None) -> None:
        if self.owner and (clean or clean is None):
            self.checkpoint_high_watermarks()
        with self._lock:
            for part in self._partitions.values():
                part.close(clean)
            self._partitions.clear()
