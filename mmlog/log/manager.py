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

Creating a topic is all or nothing: its partitions' directories are made first,
then the catalogue names it. If making any of them fails (a full disk, no
descriptor left), every partition the creation made is closed and removed, the
catalogue is unchanged, and the caller gets `KafkaStorageError` naming the cause; a
crash half way leaves directories of a topic the catalogue does not name, which
`load()` removes.

Deleting a topic removes it from the catalogue first, then marks each partition
deleted (every process sees that through the partition state) and removes its
directory; a crash in between leaves directories that `load()` removes.

Descriptors and mappings: an open partition holds eight descriptors (state page,
lock, and its active segment's log and both indexes, each mmap holding a duplicate)
and three memory mappings, and five descriptors and two mappings more while it has
an older segment open (one at most: partition.py, "Open files"), so every process
keeps at most `max_open` partitions open, least recently used first out
(`open_partition_budget`: half the descriptor limit, and a third of vm.max_map_count,
at a one-segment partition's cost). After `load()` the owner needs a partition only
for housekeeping and role changes; a processor needs the ones its clients use. A
closed one is reopened attached (no recovery, no role reset) on its next use; a
request parked on a partition (acks=all, DeleteRecords) names it rather than holding
the open log, so closing it under the request is safe, and a FileSlice being sent
keeps its own file open.
Closing one the processors still write to never marks it clean: only `close(clean=
True)` at the broker's stop does, opening each closed partition again to flush it.
Housekeeping skips a partition, open or closed, while nothing can be due (a roll
or flush not before the time recorded when it last looked), and the high watermark
checkpoint keeps a closed partition's HW as it was at close (lower is safe: a
restart that needs it never exposes more than was committed).

Offline log dirs (`log_dirs.py`, Kafka's log dir failure handling): a failing disk
(EIO...) met by any process takes its whole log dir offline in every process of the
broker. From then on `partition()` answers KafkaStorageError for each partition there
(letting go of it: unmapped, never written), `_find` and placement see only online
dirs (a partition is never made anew beside its dead copy), housekeeping, the HW
checkpoint, deletion and the clean close skip them, and a dir that fails during
`load()` is offline from the start. The check while every dir is online is one read
of a shared int32.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import stat
import threading
import time
import uuid
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

from mmlog.config.dynamic import merged, topic_defaults
from mmlog.config.settings import ConfigError, LogConfig
from mmlog.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollower,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from mmlog.log import kernels, offset_checkpoint
from mmlog.log.log_dirs import LogDirHealth, is_dir_failure, is_disk_full
from mmlog.log.files import log_size, segment_bases
from mmlog.system.files import atomic_write, file_stamp
from mmlog.log.partition import Partition
from mmlog.log.state import PartitionState, Replication, Role, Snapshot, TornState

log = logging.getLogger(__name__)

CATALOGUE = "topics.json"

# What an open one-segment partition holds in any process: partition.state and both indexes
# are mmap-ed (Python's mmap keeps a duplicate of the descriptor), so 8 descriptors with the
# lock and the log (measured: docs/robustness.md, "Descriptors"), and 3 mappings.
DESCRIPTORS_PER_PARTITION = 8
MAPPINGS_PER_PARTITION = 3
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")


@dataclass(frozen=True)
class PartitionGauges:
    """What a metrics scrape shows of one partition (`LogManager.gauges`)."""

    topic: str
    partition: int
    snapshot: Snapshot
    replication: Replication
    size_bytes: int
    segments: int


def _closed_gauges(topic: str, partition: int, directory: Path, segments_seen: dict, topic_id: str) -> PartitionGauges:
    """A closed partition's gauges from a copy of its state page and, when its segment set changed since
    `segments_seen` noted it (another generation), its directory."""
    state = PartitionState.copied(directory)
    snap, rep = state.snapshot(), state.replication()
    if snap.deleted:
        raise UnknownTopicOrPartition(f"{topic}-{partition} was deleted")
    key = (topic, partition, topic_id)
    generation, bases, older = segments_seen.get(key, (None, None, 0))
    if generation != snap.generation:  # a roll, retention or truncation since: list the segments again
        bases = segment_bases(directory)
        older = sum(log_size(directory, b) for b in bases if b != snap.active_base)
        segments_seen[key] = (snap.generation, bases, older)
    # the active segment holds what the state says (its file may be longer), as Partition.size_bytes counts it
    return PartitionGauges(topic, partition, snap, rep, older + snap.active_size, len(bases))


def open_partition_budget(configured: int = 0) -> int:
    """Partitions a process keeps open at once: `configured` (log.max.open.partitions), or when 0 half
    the descriptor limit over 8 (the other half is for connections and an older segment each) and at
    most a third of vm.max_map_count over 3 (numba, the heap and older segments map too)."""
    if configured:
        return configured
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    try:
        maps = int(MAX_MAP_COUNT.read_text())
    except (OSError, ValueError):
        maps = 65530  # the kernel's default
    return max(8, min(soft // 2 // DESCRIPTORS_PER_PARTITION, maps // 3 // MAPPINGS_PER_PARTITION))
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

    def replica_counts(self) -> Counter:
        """Its partition replicas per broker id (None for a standalone topic's, all on this broker)."""
        if self.assignment is None:
            return Counter({None: self.partitions})
        return Counter(b for replicas in self.assignment for b in replicas)

    def replicas(self, partition: int, standalone_id: int) -> list[int]:
        """The brokers holding a partition, its preferred leader first."""
        return [standalone_id] if self.assignment is None else self.assignment[partition]

    def hosts(self, partition: int, broker_id: int | None) -> bool:
        """Whether broker_id has a replica of the partition (every broker of a standalone topic)."""
        return self.assignment is None or broker_id is None or broker_id in self.assignment[partition]

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
                 broker_id: int | None = None, max_open: int | None = None) -> None:
        """`max_open`: partitions kept open at once (after load, in the owner; None: no limit)."""
        self.log_dirs = [Path(d) for d in (log_dirs if isinstance(log_dirs, list) else [log_dirs])]
        self.defaults = self.static_defaults = defaults or LogConfig()
        # Dynamic configs kept in the catalogue beside the topics: {"brokers": {level: {name: value}},
        # "quotas": {entity path: {key: value}}} (config/dynamic.py, config/quotas.py); the broker levels
        # make `defaults` over the static ones.
        self.dynamic: dict = {}
        self.owner = owner
        self.broker_id = broker_id
        self.max_open = max(2, max_open) if max_open else None
        # Told how many partitions each eviction closed (the processors' and the main process's metrics:
        # a steady count means clients spread over more partitions than a process keeps open).
        self.on_evict: Callable[[int], None] | None = None
        self._topics: dict[str, TopicInfo] = {}
        # Both caches spare the owner work per topic when thousands are auto-created: each topic's
        # catalogue JSON, valid while its TopicInfo and the objects it holds are the same (changes
        # replace them), and the replicas per broker, updated by a creation, recounted after any
        # other change.
        self._fragments: dict[str, tuple] = {}
        self._configs: dict[str, tuple] = {}  # topic -> (its overrides, the defaults, LogConfig of both)
        self._replicas: Counter | None = None
        self._partitions: OrderedDict[tuple[str, int], Partition] = OrderedDict()  # least recently used first
        self._known: set[tuple[str, int]] = set()  # opened with recovery (or created) by this owner
        self._closed_hw: dict[tuple[str, int], int] = {}  # HW of a closed partition when it was closed
        self._not_due: dict[tuple[str, int], tuple[int, int]] = {}  # closed: (no roll, no flush) before these ms
        # closed partitions' segments as the metrics scrape last listed them: (topic, partition, topic id) ->
        # (generation, bases, bytes of all but the active segment); listed again when the generation moves
        self._segments_seen: dict[tuple[str, int, str], tuple[int, list[int], int]] = {}
        self.loaded = self.recovered = 0  # partitions load() opened, and how many of them it had to recover
        # Offline log dirs, shared with every process of the broker (log_dirs.py): the owner makes the page
        # before the supervisor forks, attached managers find it. _slot_of: the log dir of each partition.
        self.dir_health = LogDirHealth.create(self.log_dirs) if owner else LogDirHealth.shared(self.log_dirs)
        self._slot_of: dict[tuple[str, int], int] = {}
        self._lock = threading.RLock()
        self._catalogue_stamp: tuple[int, int, int] | None = None
        self._defer_save = 0
        self._save_pending = False
        # Catalogue writes: each snapshot of the topics gets a version under _lock, and is written under
        # _write_lock alone (lock order: _lock, then _write_lock), so a writer thread's fsync never holds
        # up the control thread's creations; a version older than the one on disk is not written.
        self._write_lock = threading.Lock()
        self._version = self._written = 0
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
        """Read the catalogue again if it changed (attached processes call this on a miss). The owner reads
        it once, at start: after that it is the catalogue's only writer, and its memory is ahead of the file
        while a write is pending."""
        if self.owner and self._written_or_read:
            return
        stamp = file_stamp(self.catalogue_path)
        if stamp is None or stamp == self._catalogue_stamp:
            return
        data = json.loads(self.catalogue_path.read_text())
        with self._lock:
            defaults_changed = self._take_dynamic(data.get("dynamic", {}))
            before = {name: t.topic_id for name, t in self._topics.items()}
            configs = {name: t.config for name, t in self._topics.items()}
            self._replicas = None
            self._topics = {
                name: TopicInfo(name, t["partitions"], dict(t.get("config", {})), t.get("id", ""),
                                t.get("assignment"))
                for name, t in data.get("topics", {}).items()
            }
            self._configs.clear()  # every topic's overrides are new objects now
            for key in [k for k in self._partitions
                        if k[0] not in self._topics or self._topics[k[0]].topic_id != before.get(k[0])
                        or not self._hosts(*k)]:  # deleted, re-created, or reassigned away from us
                self._partitions.pop(key).close(clean=False)
            # altered configs apply at once
            self._reconfigure(self._topics if defaults_changed else
                              {t for t, info in self._topics.items() if info.config != configs.get(t)})
            self._catalogue_stamp = stamp

    def _take_dynamic(self, dynamic: dict) -> bool:
        """Hold these dynamic configs (caller holds _lock); True if the topic defaults changed."""
        dynamic = {k: v for k, v in dynamic.items() if v}
        if dynamic == self.dynamic:
            return False
        overrides = topic_defaults(merged(dynamic.get("brokers", {}), self.broker_id or 0))
        defaults = LogConfig.from_props(overrides, self.static_defaults)  # ConfigError: nothing changes
        self.dynamic = dynamic
        changed, self.defaults = defaults != self.defaults, defaults
        return changed

    def set_dynamic(self, section: str, value: dict) -> None:
        """Replace one section of the dynamic configs ("brokers" or "quotas") and write the catalogue: open
        partitions take new topic defaults at once here, other processes when they reload (owner only)."""
        self._require_owner()
        with self._lock:
            changed = self._take_dynamic({**self.dynamic, section: value})
            self._save()
            if changed:
                self._reconfigure(self._topics)
                self._not_due.clear()  # closed ones: housekeeping looks at them again, with the new defaults

    def _reconfigure(self, topics) -> None:
        """Open partitions of these topics take their config again, parsed once a topic (caller holds _lock)."""
        configs: dict[str, LogConfig] = {}
        for (topic, _), part in self._partitions.items():
            if topic in topics:
                if topic not in configs:
                    configs[topic] = LogConfig.from_props(self._topics[topic].config, self.defaults)
                part.config = configs[topic]

    def set_broker_level(self, level: str, values: dict[str, str]) -> None:
        """Replace one level of the dynamic broker configs (a broker id or `<default>`; empty: removed)."""
        levels = {**self.dynamic.get("brokers", {}), level: values}
        self.set_dynamic("brokers", {k: v for k, v in levels.items() if v})

    def _hosts(self, topic: str, partition: int) -> bool:
        info = self._topics[topic]
        return partition >= info.partitions or info.hosts(partition, self.broker_id)

    def _save(self, created: TopicInfo | None = None) -> None:
        """Write the catalogue now (caller holds _lock), or mark it pending inside one_catalogue_write.
        Every change of the catalogue comes here: `created` names a new topic (its replicas are counted
        in), anything else makes the replica counts be recounted."""
        if created is not None and self._replicas is not None:
            self._replicas.update(created.replica_counts())
        else:
            self._replicas = None
        if self._defer_save:
            self._save_pending = True
            return
        self._write(self._snapshot_catalogue())

    def _snapshot_catalogue(self) -> tuple[int, bytes]:
        """(version, bytes) of the catalogue as it is now (caller holds _lock)."""
        self._version += 1
        fragments = [self._fragment(name, info) for name, info in sorted(self._topics.items())]
        for cache in (self._fragments, self._configs):  # deleted topics
            for name in [n for n in cache if n not in self._topics]:
                del cache[name]
        dynamic = b',"dynamic":' + json.dumps(self.dynamic, separators=(",", ":")).encode() if self.dynamic else b""
        return self._version, b'{"version":1,"topics":{' + b",".join(fragments) + b"}" + dynamic + b"}"

    def _fragment(self, name: str, info: TopicInfo) -> bytes:
        """`"name":{...}` of one topic in the catalogue's JSON, encoded once per change of the topic."""
        key = (info, info.config, info.assignment, info.partitions)
        cached = self._fragments.get(name)
        if cached is None or any(a is not b for a, b in zip(cached[:3], key)) or cached[3] != key[3]:
            text = json.dumps(name) + ":" + json.dumps(info.to_json(), separators=(",", ":"))
            cached = self._fragments[name] = (*key, text.encode())
        return cached[4]

    def replica_counts(self) -> Counter:
        """Partition replicas per broker id over the catalogue (None: standalone topics' ones)."""
        with self._lock:
            if self._replicas is None:
                self._replicas = Counter()
                for info in self._topics.values():
                    self._replicas.update(info.replica_counts())
            return Counter(self._replicas)

    def _write(self, snapshot: tuple[int, bytes]) -> None:
        version, data = snapshot
        with self._write_lock:
            if version <= self._written:
                return  # a newer catalogue is already on disk
            atomic_write(self.catalogue_path, data)
            self._written = version
            self._catalogue_stamp = file_stamp(self.catalogue_path)

    @property
    def _written_or_read(self) -> bool:
        return self._written > 0 or self._catalogue_stamp is not None

    @contextmanager
    def one_catalogue_write(self, write_at_end: bool = True):
        """Topics created or deleted inside are written to the catalogue once, at the end (owner only):
        auto-creation makes topics in small steps, and a catalogue of thousands of topics costs
        milliseconds to write (and an fsync). Other processes see them all at once, after. With
        write_at_end false the write waits for `write_pending_catalogue` (or the next change)."""
        with self._lock:
            self._defer_save += 1
            try:
                yield
            finally:
                self._defer_save -= 1
                if write_at_end:
                    self.write_pending_catalogue()

    def write_pending_catalogue(self) -> None:
        """Write the catalogue if changes inside `one_catalogue_write` are not written yet; the write (and
        its fsync) happens outside the manager's lock, so creations go on meanwhile."""
        with self._lock:
            if self._defer_save or not self._save_pending:
                return
            self._save_pending = False
            snapshot = self._snapshot_catalogue()
        self._write(snapshot)

    def topics(self) -> dict[str, TopicInfo]:
        """A copy of the catalogue (safe to iterate while topics come and go)."""
        return dict(self._topics)

    def has_topic(self, name: str) -> bool:
        """Whether the catalogue names the topic (without `topics()`' copy of it)."""
        return name in self._topics

    def topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            self.reload()
            info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    def config_for(self, topic: str) -> LogConfig:
        """The topic's LogConfig, parsed once per change of its overrides or of the defaults (changes replace
        those objects, never mutate them): a processor reopening closed partitions asks for it each time."""
        props, defaults = self.topic(topic).config, self.defaults
        cached = self._configs.get(topic)
        if cached is None or cached[0] is not props or cached[1] is not defaults:
            cached = self._configs[topic] = (props, defaults, LogConfig.from_props(props, defaults))
        return cached[2]

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

    # ------------------------------------------------------------ partitions

    def partition(self, topic: str, partition: int) -> Partition:
        """The open partition log (opened on first use; in the owner, maybe closing the least recently used)."""
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is not None:
            if self.dir_health.any_offline[0]:
                self._check_online(key)
            if self.max_open is not None:
                with self._lock:
                    if key in self._partitions:
                        self._partitions.move_to_end(key)
            return part
        info = self.topic(topic)
        if partition >= info.partitions and not self.owner:  # grown since we read the catalogue?
            self.reload()
            info = self.topic(topic)
        if not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartition(f"{topic} has no partition {partition}")
        if self.broker_id is not None and self.broker_id not in (replicas := info.replicas(partition, self.broker_id)):
            raise NotLeaderOrFollower(f"{topic}-{partition} lives on brokers {replicas}")
        with self._lock:
            part = self._partitions.get(key) or self._open(topic, partition, info)
            self._partitions[key] = part
            self._evict()
            return part

    # ------------------------------------------------------------ offline log dirs (log_dirs.py)

    def _check_online(self, key: tuple[str, int]) -> None:
        """KAFKA_STORAGE_ERROR for a partition whose log dir went offline; this process lets go of it
        (its mmaps are never touched again)."""
        slot = self._slot_of.get(key)
        if slot is not None and self.dir_health.offline(slot):
            with self._lock:
                part = self._partitions.pop(key, None)
                if part is not None:
                    part.close(clean=False)  # unmaps and closes: no write, no msync
            raise KafkaStorageError(f"{key[0]}-{key[1]}: log dir {self.log_dirs[slot]} is offline")

    def _failed(self, path: Path, exc: OSError) -> KafkaStorageError:
        """An I/O error outside a partition's own reads and writes (opening, listing, housekeeping):
        a failing disk takes its log dir offline."""
        slot = self.dir_health.slot_of(path)
        if is_dir_failure(exc) and slot is not None:
            self.dir_health.mark_offline(slot, exc.errno)
        return KafkaStorageError(f"{path}: {exc.strerror or exc}")

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether a hosted partition is on an offline log dir (Metadata); no disk access while every
        dir is online. A partition found in no online dir while some dir is offline counts as offline."""
        if not self.dir_health.any_offline[0]:
            return False
        slot = self._slot_of.get((topic, partition))
        if slot is None:
            try:
                directory = self._find(topic, partition)
            except KafkaStorageError:
                return True
            if directory is None:
                return True
            slot = self._slot_of[(topic, partition)] = self.dir_health.slot_of(directory)
        return self.dir_health.offline(slot)

    def offline_partitions(self, slot: int) -> list[tuple[str, int]]:
        """The partitions this manager knows to be in log dir `slot` (the owner knows every hosted one)."""
        return sorted(key for key, s in self._slot_of.items() if s == slot and key[0] in self._topics)

    def drop_offline(self) -> int:
        """Close (unmap, without writing) the open partitions of offline log dirs; returns how many."""
        with self._lock:
            doomed = [k for k in self._partitions if self.dir_health.offline(self._slot_of.get(k, -1))]
            for key in doomed:
                self._partitions.pop(key).close(clean=False)
            return len(doomed)

    def _make_partition(self, name: str, p: int, log_config, assignment, counts, made: list) -> None:
        """A new partition of a topic being created or grown, placed and opened (its directory noted in
        `made`, for the caller's all-or-nothing undo): led alone standalone, waiting for its role in a
        cluster (caller holds the lock)."""
        directory = self._place(name, p, counts)
        made.append(directory)
        part = Partition(directory, log_config, broker_id=self.broker_id or 0)
        self._partitions[(name, p)] = part
        self._slot_of[(name, p)] = self.dir_health.slot_of(directory)
        self._known.add((name, p))
        if assignment is None:
            self._lead_alone(part)
        else:
            part.stop_serving(assignment[p])
        self._remember_due((name, p), part, part.snapshot())
        self._evict()

    def _open(self, topic: str, partition: int, info: TopicInfo) -> Partition:
        key = (topic, partition)
        directory = self._find(topic, partition)
        if directory is None and self.dir_health.any_offline[0]:  # never made anew beside its dead copy
            raise KafkaStorageError(f"{topic}-{partition} is in no online log dir")
        try:
            part = self._open_in(key, directory, info)
        except OSError as exc:
            if is_dir_failure(exc):
                raise self._failed(directory or self.log_dirs[0], exc) from exc
            raise
        self._slot_of[key] = self.dir_health.slot_of(part.directory)
        return part

    def _open_in(self, key: tuple[str, int], directory: Path | None, info: TopicInfo) -> Partition:
        topic, partition = key
        if self.owner and key in self._known:  # closed to save descriptors: attach again, as it was
            if directory is None:
                raise UnknownTopicOrPartition(f"{topic}-{partition} has no directory")
            part = Partition(directory, self.config_for(topic), recover=False, broker_id=self.broker_id or 0)
            self._closed_hw.pop(key, None)
            return part
        if directory is None:
            if not self.owner:
                raise UnknownTopicOrPartition(f"{topic}-{partition} has no directory yet")
            directory = self._place(topic, partition)
        checkpoint_hw = self._checkpoints(directory.parent).get(key) if self.owner else None
        part = Partition(directory, self.config_for(topic), recover=self.owner, checkpoint_hw=checkpoint_hw,
                         broker_id=self.broker_id or 0)
        if self.owner:
            self._known.add(key)
            if info.assignment is None:
                self._lead_alone(part)
            else:  # whatever role it had before a restart is stale until the control plane says
                part.stop_serving(info.assignment[partition])
        return part

    def _evict(self) -> None:
        """Close least recently used partitions past max_open (never marking them clean: processors
        may still be appending). Caller holds the lock."""
        if self.max_open is None:
            return
        closed = 0
        while len(self._partitions) > self.max_open:
            key, part = self._partitions.popitem(last=False)
            if self.owner:
                self._note_closed(key, part)
            part.close(clean=False)
            closed += 1
        if closed and self.on_evict is not None:
            self.on_evict(closed)

    def _note_closed(self, key: tuple[str, int], part: Partition) -> None:
        """What housekeeping needs of a partition while it is closed (see the module docstring)."""
        try:
            snap = part.snapshot()
        except Exception:  # noqa: BLE001 - deleted or torn: housekeeping opens it next time
            return
        self._closed_hw[key] = snap.high_watermark
        self._remember_due(key, part, snap)

    def _remember_due(self, key: tuple[str, int], part: Partition, snap) -> None:
        """The earliest times a roll and a flush of the partition can be due: rolled_at_ms and
        flushed_at_ms only move forward, and an empty active segment gets its first batch from now on."""
        now = int(time.time() * 1000)
        no_roll = (snap.rolled_at_ms if snap.active_size else now) + part.config.segment_ms
        self._not_due[key] = (no_roll, snap.flushed_at_ms + part.config.flush_ms)

    def open_count(self) -> int:
        """Partitions open in this process now."""
        return len(self._partitions)

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

    def checkpoint_high_watermarks(self, closed_hw: dict | None = None) -> None:
        """Write each log dir's replication-offset-checkpoint (owner only): open partitions' HWs, and
        closed ones' as they were at close (`closed_hw`, default the manager's own record)."""
        self._require_owner()
        closed_hw = self._closed_hw if closed_hw is None else closed_hw
        per_dir: dict[Path, dict] = {d: {} for d in self.log_dirs}
        for (topic, p), part in list(self._partitions.items()):
            if self.dir_health.offline(self._slot_of.get((topic, p))):
                continue  # its mmaps are not touched again
            try:
                per_dir.setdefault(part.directory.parent, {})[topic, p] = part.high_watermark
            except UnknownTopicOrPartition:
                continue  # deleted meanwhile
        for (topic, p), hw in list(closed_hw.items()):
            if (topic, p) not in self._partitions and (directory := self._find(topic, p)) is not None:
                per_dir.setdefault(directory.parent, {})[topic, p] = hw
        for log_dir, entries in per_dir.items():
            slot = self.dir_health.slot_of(log_dir)
            if self.dir_health.offline(slot):
                continue
            try:
                offset_checkpoint.write(log_dir / offset_checkpoint.HIGH_WATERMARKS, entries)
            except OSError as exc:
                self._failed(log_dir, exc)
                if not is_dir_failure(exc):
                    raise

    def _find(self, topic: str, partition: int) -> Path | None:
        """The partition's directory in an online log dir, or None."""
        for slot, d in enumerate(self.log_dirs):
            if self.dir_health.offline(slot):
                continue
            candidate = d / f"{topic}-{partition}"
            try:
                mode = os.stat(candidate).st_mode
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:  # EIO: a failing disk (Path.is_dir would raise it too, os.path.isdir hide it)
                raise self._failed(d, exc) from exc
            if stat.S_ISDIR(mode):
                self._slot_of[(topic, partition)] = slot
                return candidate
        return None

    def _place(self, topic: str, partition: int, counts: dict[Path, int] | None = None) -> Path:
        """Existing directory of a partition, or a new one in the emptiest data dir (`counts`: directories
        per data dir, counted once by the caller and kept up to date here)."""
        found = self._find(topic, partition)
        if found is not None:
            return found
        online = [self.log_dirs[slot] for slot in self.dir_health.online_slots()]
        if not online:
            raise KafkaStorageError("every log dir is offline")
        if len(online) == 1:
            return online[0] / f"{topic}-{partition}"
        counts = self._dir_counts() if counts is None else counts
        emptiest = min(online, key=lambda d: counts.get(d, 0))
        counts[emptiest] = counts.get(emptiest, 0) + 1
        return emptiest / f"{topic}-{partition}"

    def _dir_counts(self) -> dict[Path, int]:
        """Partition directories per online log dir."""
        counts = {}
        for slot in self.dir_health.online_slots():
            d = self.log_dirs[slot]
            try:
                counts[d] = sum(1 for e in os.scandir(d) if e.is_dir())
            except OSError as exc:
                raise self._failed(d, exc) from exc
        return counts

    def load(self) -> list[str]:
        """Owner start-up: open (recovering as needed) every partition of the catalogue.

        Returns the recovery notes. Directories of deleted topics are removed.
        """
        self._require_owner()
        notes = []
        for d in self.log_dirs:
            try:
                self._remove_leftovers(d)
            except OSError as exc:
                self._failed(d, exc)
                if not is_dir_failure(exc):
                    raise
        self.loaded = self.recovered = 0
        for name, info in self._topics.items():
            for p in info.hosted(self.broker_id):
                try:
                    part = self.partition(name, p)
                except KafkaStorageError as exc:  # a log dir that fails at start is offline from the start
                    notes.append(f"{name}-{p}: {exc}")
                    continue
                notes += part.recovered_notes
                self.loaded += 1
                self.recovered += part.recovered
        return notes

    def _remove_leftovers(self, d: Path) -> None:
        """Directories of deletions and creations cut short."""
        for entry in os.scandir(d):
            if not entry.is_dir():
                continue
            if entry.name.endswith("-delete"):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(entry.name)
            if m and (m["topic"] not in self._topics or not self._hosts(m["topic"], int(m["partition"]))):
                shutil.rmtree(entry.path, ignore_errors=True)  # a deletion (or a reassignment away) cut short

    def hosted(self) -> list[tuple[str, int]]:
        """Every partition of the catalogue with a replica here."""
        return [(name, p) for name, info in list(self._topics.items()) for p in info.hosted(self.broker_id)]

    def partitions(self, keys=None) -> Iterator[tuple[str, int, Partition]]:
        """The partitions open here; in the owner every hosted one (or those of `keys`), opened in turn
        (each stays valid for the caller's step: the least recently used are the ones closed)."""
        if not self.owner:
            for (topic, p), part in list(self._partitions.items()):
                yield topic, p, part
            return
        for topic, p in self.hosted() if keys is None else keys:
            try:
                part = self.partition(topic, p)
            except (UnknownTopicOrPartition, NotLeaderOrFollower):
                continue  # deleted meanwhile
            except KafkaStorageError:
                continue  # its log dir is offline
            yield topic, p, part

    def gauges(self) -> Iterator["PartitionGauges"]:
        """Every hosted partition's offsets, replication and size (the owner's metrics scrape), without
        opening a closed partition's log: its state page is copied, and its segments are listed only when
        their generation moved. Reopening them in turn evicted the partitions housekeeping had open, for a
        scrape every few seconds (docs/benchmarks.md, "metrics-scrape")."""
        for key in [k for k in self._segments_seen if k[0] not in self._topics]:
            del self._segments_seen[key]  # deleted topics
        for topic, p in self.hosted():
            key = (topic, p)
            try:
                part = self._partitions.get(key)
                if part is not None:
                    yield PartitionGauges(topic, p, part.snapshot(), part.replication(), part.size_bytes(),
                                          len(part.segment_bases()))
                    continue
                slot = self._slot_of.get(key)
                if self.dir_health.offline(slot if slot is not None else -1):
                    continue
                # where it lives is known after load(): no stat first (a missing directory fails the read)
                directory = self.log_dirs[slot] / f"{topic}-{p}" if slot is not None else self._find(topic, p)
                if directory is not None:
                    yield _closed_gauges(topic, p, directory, self._segments_seen, self._topics[topic].topic_id)
            except (OSError, ValueError, KafkaError, TornState):
                continue  # deleted, torn or failing meanwhile: not shown this time

    # ------------------------------------------------------------ housekeeping

    def apply_retention(self, keys=None) -> int:
        return sum(self._housekeep(part, Partition.apply_retention) for _, _, part in self.partitions(keys))

    def _housekeep(self, part: Partition, work) -> int:
        """work(part); a failing disk takes the partition's log dir offline and the round goes on."""
        try:
            return work(part)
        except OSError as exc:
            self._failed(part.directory, exc)
            if not is_dir_failure(exc):
                raise
            return 0

    def flush_due(self, keys=None) -> int:
        """fsync partitions whose flush.ms has passed (the housekeeping timer)."""
        return self._due(1, keys, Partition.maybe_flush)

    def roll_due(self, keys=None) -> int:
        """Roll partitions whose active segment is older than segment.ms (the housekeeping timer)."""
        return self._due(0, keys, Partition.maybe_roll)

    def _due(self, which: int, keys, work) -> int:
        """Run work (a roll: which=0, a flush: 1) on the partitions where it may be due, and remember
        for each one the earliest time it can next be due: a timer pass over thousands of partitions
        then looks at the few whose time has come, and never opens a closed one before."""
        now = int(time.time() * 1000)
        candidates = []
        for key in self.hosted() if keys is None else keys:
            bounds = self._not_due.get(key)
            if bounds is None or bounds[which] <= now:
                candidates.append(key)
        done = 0
        for key, part in ((k, p) for *k, p in self.partitions(candidates)):
            key = tuple(key)
            done += self._housekeep(part, work)
            if self.dir_health.offline(self._slot_of.get(key)):
                continue
            try:
                self._remember_due(key, part, part.snapshot())
            except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to remember
                continue
        return done

    def close(self, clean: bool | None = None) -> None:
        """Close every partition. The owner's clean close (at the broker's stop, after the processors)
        flushes and marks every hosted partition clean, opening closed ones again one at a time."""
        with self._lock:
            if self.owner and (clean or clean is None):
                hws = {}
                for key in self.hosted():
                    part = self._partitions.pop(key, None)
                    if self.dir_health.offline(self._slot_of.get(key)):
                        if part is not None:
                            part.close(clean=False)  # a dead disk: recovered at the next start, if it is back
                        continue
                    if part is None:
                        try:
                            part = self._open(*key, self._topics[key[0]])
                        except (UnknownTopicOrPartition, KafkaStorageError, OSError):
                            continue  # gone, or cannot be opened: recovered at the next start instead
                    try:
                        hws[key] = part.high_watermark
                    except UnknownTopicOrPartition:
                        pass
                    try:
                        part.close(True)
                    except OSError as exc:  # the disk failed at the last moment: recovery will do
                        self._failed(part.directory, exc)
                        part.close(clean=False)
                for part in self._partitions.values():  # not hosted (none expected): closed as they are
                    part.close(clean=False)
                self._partitions.clear()
                try:
                    self.checkpoint_high_watermarks(hws)
                except OSError as exc:
                    if not is_disk_full(exc):
                        raise
                    # A full disk at shutdown: the partitions closed cleanly above keep their high
                    # watermarks in their state pages, which a clean open trusts; the checkpoint (read
                    # only by a full recovery) stays at its last write. Not a failed shutdown.
                    log.warning("shutdown: high watermark checkpoint not written (%s); the partitions' "
                                "state pages hold them", exc.strerror)
                return
            for part in self._partitions.values():
                part.close(clean)
            self._partitions.clear()
