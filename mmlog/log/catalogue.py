"""The topic catalogue: the topics a broker's log manager knows, their configs and assignments.

On disk: `topics.json` in the first data directory: every topic's partition count,
per-topic config overrides (Kafka names), topic id and, in cluster mode, its
assignment (replicas per partition), and the dynamic configs beside them (`dynamic`:
broker levels and quotas, config/dynamic.py). Written atomically (a temporary file,
fsynced, renamed over it, the directory fsynced: system/files.atomic_write) by the
one process that owns the manager (the broker's control plane); other processes
read it, again whenever it changed and they are asked about a topic they do not know.

Crash points: a write is one atomic replacement, so a crash leaves the old catalogue
or the new one whole. The catalogue is written after the partition directories a
creation makes and before those a deletion removes, so a crash in between leaves
directories the catalogue does not name, which the next start removes
(`LogManager.load`). Writes of successive versions can overlap (a writer thread's
fsync outside the manager's lock): a version older than the one on disk is not
written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from mmlog.config.dynamic import merged, topic_defaults
from mmlog.config.settings import LogConfig
from mmlog.errors import InvalidTopic, UnknownTopicOrPartition
from mmlog.system.files import atomic_write, file_stamp
from mmlog.log.manager_state import ManagerState
from mmlog.log.topic_info import TopicInfo

CATALOGUE = "topics.json"

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_name(name: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not _LEGAL_TOPIC.match(name or "") or name in (".", ".."):
        raise InvalidTopic(f"illegal topic name {name!r}")


class Catalogue(ManagerState):
    """The catalogue of a LogManager, in memory and on disk (a part of LogManager)."""

    @property
    def catalogue_path(self) -> Path:
        return self.log_dirs[0] / CATALOGUE

    @property
    def catalogue_stamp(self):
        """The catalogue file's stamp as last read here: it changes with every reload that found changes."""
        return self._catalogue_stamp

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
