"""The cluster as a broker's processors see it: live brokers, the controller, group coordinators.

The main process owns the truth (its ZooKeeper watches, or just itself when
standalone) and publishes it as `cluster.json` in the first data directory,
written atomically; processors re-read it when it was replaced (`system.files.file_stamp`: a `stat` per
Metadata or FindCoordinator request, nothing on the produce and fetch paths).

In cluster mode the view also carries every partition's state as ZooKeeper last
said it (leader, leader epoch, ISR), for Metadata; the replicas themselves are in
the topic catalogue. Standalone, every partition is led here alone and the view
carries none.

A group's coordinator is chosen by rendezvous hashing over the live brokers: the
broker with the highest hash of (group, broker id). Every broker computes the same
answer from the same view, and when a broker leaves or joins only the groups it
held or wins move.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from mmlog.system.files import atomic_write, file_stamp

FILE_NAME = "cluster.json"
TRANSACTION_STATE = "__transaction_state"


@dataclass(frozen=True)
class Endpoint:
    """A live broker as clients reach it: host and port of its first listener, and every listener's
    (name, host, port), so Metadata answers with the listener the request came in on (Kafka's rule)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple = ()  # ((name, host, port), ...)
    registry: tuple = ()  # the URLs its schema registry listens on (schema.registry.listeners)
    started: int = 0  # when it registered (ms since the epoch; its ZooKeeper registration's timestamp), 0: unknown

    def __post_init__(self) -> None:
        object.__setattr__(self, "listeners", tuple(tuple(x) for x in self.listeners))
        object.__setattr__(self, "registry", tuple(self.registry or ()))

    @classmethod
    def of(cls, config) -> "Endpoint":
        """This broker as a BrokerConfig describes it: every advertised listener, its registry's URLs (a
        wildcard host as the first listener's advertised host)."""
        host = config.advertised[0]
        registry = tuple(f"{scheme}://{h if h not in ('0.0.0.0', '::', '') else host}:{port}"
                         for scheme, h, port in config.registry_listeners)
        return cls(config["broker.id"], *config.advertised, config["broker.rack"] or None,
                   tuple((a.name, a.host, a.port) for a in config.advertised_listeners), registry)

    def address(self, listener: str | None) -> tuple[str, int]:
        """(host, port) on the named listener; the first listener's for a broker that has no such name."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(frozen=True)
class ClusterView:
    """Live brokers by id, the controller's id (-1: none elected), partition states by topic."""

    brokers: dict[int, Endpoint]
    controller_id: int
    partitions: dict[str, list] = field(default_factory=dict)  # topic -> [[leader, epoch, [isr]], ...]

    def partition(self, topic: str, partition: int) -> tuple[int, int, list[int]] | None:
        """(leader, leader epoch, ISR) of a partition in cluster mode; None when the view has no state."""
        states = self.partitions.get(topic)
        if states is None or partition >= len(states):
            return None
        return states[partition]

    @classmethod
    def standalone(cls, me: Endpoint) -> "ClusterView":
        return cls({me.node_id: me}, me.node_id)

    def coordinator_for(self, group_id: str) -> int:
        """The live broker that coordinates a group (rendezvous hashing), -1 if none is live."""
        if not self.brokers:
            return -1
        key = group_id.encode()
        return max(self.brokers, key=lambda node: (_weight(key, node), node))

    def transaction_coordinator(self, transactional_id: str, partitions: int, me: int) -> int:
        """The broker that coordinates a transactional id: the leader of its `__transaction_state`
        partition (standalone, `me`); -1 while that partition has no live leader."""
        if not self.partitions:
            return me
        state = self.partition(TRANSACTION_STATE, transaction_partition(transactional_id, partitions))
        return state[0] if state and state[0] in self.brokers else -1

    def to_json(self) -> bytes:
        return json.dumps({
            "controller": self.controller_id, "partitions": self.partitions,
            "brokers": [[b.node_id, b.host, b.port, b.rack, b.listeners, b.registry]
                        + ([b.started] if b.started else [])  # absent when unknown: a standalone view's bytes
                        for b in sorted(self.brokers.values(), key=lambda b: b.node_id)],
        }).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "ClusterView":
        doc = json.loads(data)
        return cls({b[0]: Endpoint(*b) for b in doc["brokers"]}, doc["controller"], doc.get("partitions", {}))

    def write(self, directory: Path) -> None:
        """Publish the view, unless the file already says exactly this (a restart with the same
        endpoint: the same bytes, and no block needed, so that a broker starts on a full disk)."""
        path, data = Path(directory) / FILE_NAME, self.to_json()
        try:
            if path.read_bytes() == data:
                return
        except OSError:
            pass
        atomic_write(path, data)


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """The `__transaction_state` partition of an id: Kafka's abs(String.hashCode) % partitions, so
    the same ids land on the same partition numbers as in a Kafka cluster of that size."""
    raw = transactional_id.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    if h & 0x80000000:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions  # Kafka's Utils.abs


def _weight(key: bytes, node: int) -> bytes:
    """A well-mixed hash of (group, broker): CRCs are affine, so their order would not depend on the group."""
    return hashlib.blake2b(key, digest_size=8, person=b"%d" % node).digest()


class ViewReader:
    """A processor's copy of the view, re-read when the file was replaced."""

    def __init__(self, directory: Path, fallback: ClusterView) -> None:
        self.path = Path(directory) / FILE_NAME
        self.view = fallback
        self._stamp: tuple[int, int, int] | None = None

    def current(self) -> ClusterView:
        stamp = file_stamp(self.path)
        if stamp is not None and stamp != self._stamp:
            try:
                self.view = ClusterView.from_json(self.path.read_bytes())
                self._stamp = stamp
            except (OSError, ValueError, KeyError):
                pass  # replaced again meanwhile: the next call reads the newer one
        return self.view
