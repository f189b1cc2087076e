"""Topic admin on a broker's log manager (owner only): create, grow, reassign, delete, reconfigure.

Creating a topic is all or nothing: its partitions' directories are made first,
then the catalogue names it. If making any of them fails (a full disk, no
descriptor left), every partition the creation made is closed and removed, the
catalogue is unchanged, and the caller gets `KafkaStorageError` naming the cause.
Growing a topic and a reassignment's new replicas go the same way.

On disk: partition directories `<topic>-<partition>/` in the data directories
(placement.py chooses which) and `topics.json` (catalogue.py); nothing of its own.

Crash points: a creation (or growth) that crashes half way leaves directories of
partitions the catalogue does not name (or count), which `load()` removes (or the
next growth reuses, empty). Deleting a topic removes it from the catalogue first,
then marks each partition deleted (every process sees that through the partition
state) and removes its directory; a crash in between leaves directories that
`load()` removes, as does a reassignment away from this broker cut short.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path
from typing import Mapping

from mmlog.config.settings import ConfigError, LogConfig
from mmlog.errors import (
    InvalidConfig,
    InvalidPartitions,
    KafkaError,
    KafkaStorageError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from mmlog.log.catalogue import validate_topic_name
from mmlog.log.topic_info import TopicInfo
from mmlog.log.log_dirs import is_dir_failure
from mmlog.log.manager_state import ManagerState

log = logging.getLogger(__name__)


class TopicAdmin(ManagerState):
    """Creating, growing, reassigning, deleting and reconfiguring topics (a part of LogManager)."""

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
        """Create a topic and the directories of its partitions that live here: all or nothing."""
        self._require_owner()
        overrides = self.validate_topic(name, partitions, config)
        log_config = LogConfig.from_props(overrides, self.defaults)
        with self._lock:
            if name in self._topics:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            info = TopicInfo(name, partitions, overrides, topic_id or uuid.uuid4().hex, assignment)
            hosted = info.hosted(self.broker_id)
            made: list[Path] = []
            counts = self._dir_counts() if len(self.log_dirs) > 1 else None
            p = -1
            try:
                for p in hosted:  # the normalised assignment (an old catalogue's [id, ...] is [[id], ...] there)
                    self._make_partition(name, p, log_config, info.assignment, counts, made)
                self._topics[name] = info
                self._save(created=info)
            except BaseException as exc:
                # Crash point: directories made but not yet named by the catalogue are removed by load().
                self._topics.pop(name, None)
                self._replicas = None
                self._undo_create(name, made)
                if isinstance(exc, OSError):
                    if made:
                        self.dir_health.report(made[-1], exc)
                    raise KafkaStorageError(f"cannot create topic {name!r}: partition {p} of {partitions}: "
                                            f"{exc.strerror or exc}; nothing was created") from exc
                raise
            return info

    def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None) -> TopicInfo:
        """Grow a topic to `count` partitions (CreatePartitions): the new ones hosted here are made, then
        the catalogue names them; all or nothing, as a creation. `assignment`: every partition's replicas
        (cluster mode), the existing ones unchanged."""
        self._require_owner()
        with self._lock:
            info = self.topic(name)
            old, old_assignment = info.partitions, info.assignment
            if count <= old:
                raise InvalidPartitions(f"Topic already has {old} partitions." if count == old else
                                        f"Topic currently has {old} partitions, which is higher than the "
                                        f"requested {count}.")
            grown = TopicInfo(name, count, info.config, info.topic_id, assignment)
            log_config = self.config_for(name)
            made: list[Path] = []
            counts = self._dir_counts() if len(self.log_dirs) > 1 else None
            try:
                for p in (q for q in grown.hosted(self.broker_id) if q >= old):
                    self._make_partition(name, p, log_config, assignment, counts, made)
                info.partitions, info.assignment = count, grown.assignment
                self._save()
            except BaseException as exc:
                # Crash point: directories of partitions the catalogue does not count yet; the next
                # growth (or creation) reuses them as they are, empty.
                info.partitions, info.assignment = old, old_assignment
                for key in [k for k in self._partitions if k[0] == name and k[1] >= old]:
                    self._partitions.pop(key).close(clean=False)
                    self._known.discard(key)
                for directory in made:
                    shutil.rmtree(directory, ignore_errors=True)
                if isinstance(exc, OSError):
                    if made:
                        self.dir_health.report(made[-1], exc)
                    raise KafkaStorageError(f"cannot add partitions to {name!r}: {exc.strerror or exc}; "
                                            "nothing was added") from exc
                raise
            return info

    def reassign(self, name: str, assignment: list[list[int]]) -> tuple[list, list]:
        """A topic's replicas moved (a partition reassignment): partitions new here are made (empty, waiting
        for their role), the catalogue names the new assignment, then partitions no longer here are deleted.
        Returns (made, deleted) keys. Crash points: directories made but not yet in the catalogue, or no
        longer in it but not yet deleted, are strays that `load()` removes."""
        self._require_owner()
        with self._lock:
            info = self.topic(name)
            grown = TopicInfo(name, info.partitions, info.config, info.topic_id, assignment)
            before, after = set(info.hosted(self.broker_id)), set(grown.hosted(self.broker_id))
            made: list[Path] = []
            try:
                for p in sorted(after - before):
                    self._make_partition(name, p, self.config_for(name), grown.assignment, None, made)
            except OSError as exc:
                for p in sorted(after - before):
                    if (part := self._partitions.pop((name, p), None)) is not None:
                        part.close(clean=False)
                    self._known.discard((name, p))
                for directory in made:
                    shutil.rmtree(directory, ignore_errors=True)
                raise KafkaStorageError(f"cannot make the new replicas of {name!r}: {exc.strerror or exc}") from exc
            info.assignment = grown.assignment
            self._save()
            for p in sorted(before - after):
                part = self._partitions.pop((name, p), None)
                try:
                    part = part or self._open(name, p, grown)
                    part.stop_serving()  # requests parked on it (acks=all) answer NOT_LEADER_OR_FOLLOWER
                    part.delete()
                except (KafkaError, OSError) as exc:  # gone already, or an offline dir: load() removes it
                    log.warning("cannot delete %s-%d, no longer a replica here: %s", name, p, exc)
                for table in (self._closed_hw, self._not_due, self._slot_of):
                    table.pop((name, p), None)
                self._known.discard((name, p))
            return [(name, p) for p in sorted(after - before)], [(name, p) for p in sorted(before - after)]

    def _undo_create(self, name: str, made: list[Path]) -> None:
        """Close and remove every partition a failed creation made (descriptors first, then files)."""
        for key in [k for k in self._partitions if k[0] == name]:
            try:
                self._partitions.pop(key).close(clean=False)
            except Exception:  # noqa: BLE001 - half made: whatever is open goes with the directory
                pass
        self._forget(name)
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)

    def _forget(self, name: str) -> None:
        """Drop what the owner remembers of a topic's closed partitions."""
        self._known = {k for k in self._known if k[0] != name}
        for table in (self._closed_hw, self._not_due, self._slot_of):
            for key in [k for k in table if k[0] == name]:
                del table[key]

    def delete_topic(self, name: str) -> None:
        self._require_owner()
        with self._lock:
            info = self.topic(name)
            del self._topics[name]
            self._save()
            for p in info.hosted(self.broker_id):
                part = self._partitions.pop((name, p), None)
                if self.dir_health.offline(self._slot_of.get((name, p), -1)):
                    if part is not None:
                        part.close(clean=False)
                    continue  # its directory stays on the dead disk; load() removes it once the dir is back
                try:
                    if part is None:
                        part = self._open(name, p, info)
                    part.delete()
                except UnknownTopicOrPartition:
                    continue  # never made here (a creation cut short)
                except KafkaStorageError:
                    continue  # its log dir went offline: as above
                except OSError as exc:
                    self._failed(part.directory, exc)
                    if not is_dir_failure(exc):
                        raise
            self._forget(name)

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
            for key in [k for k in self._not_due if k[0] == name]:
                del self._not_due[key]  # closed ones: housekeeping looks at them again, with the new config

    def _require_owner(self) -> None:
        if not self.owner:
            raise RuntimeError("topic admin runs in the process that owns the log manager")
