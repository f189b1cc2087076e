"""What a client knows of the cluster: the brokers and each partition's leader, from Metadata.

`Cluster.refresh` asks any reachable broker (the known ones first, then the
bootstrap list) for Metadata v8 and replaces the cached view. Clients refresh when
they meet an unknown topic, or when a broker answers NOT_LEADER_OR_FOLLOWER /
UNKNOWN_TOPIC_OR_PARTITION / a dead connection. An unreachable cluster is a clear
`ConnectionClosed` after `timeout` seconds, never a hang.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from mmlog.client.connection import BrokerConnection, ConnectionClosed, parse_bootstrap
from mmlog.security.client import ClientSecurity
from mmlog.errors import (IllegalSaslState, KafkaError, LeaderNotAvailable, SaslAuthenticationFailed,
                          UnknownTopicOrPartition, UnsupportedSaslMechanism, error_for_code)
from mmlog.protocol import ProtocolError
from mmlog.protocol.messages import metadata

METADATA_VERSION = 8


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    leaders: tuple[int, ...]  # leader node id per partition (-1: none)
    error: int = 0
    replicas: tuple[tuple[int, ...], ...] = ()  # per partition, as Metadata reports them
    isr: tuple[tuple[int, ...], ...] = ()

    @property
    def partitions(self) -> int:
        return len(self.leaders)


class Cluster:
    """The cached cluster view shared by a client's producer, consumer or admin."""

    def __init__(self, bootstrap: str, *, client_id: str = "mmlog", timeout: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.security = security  # every connection of this client: TLS and SASL (security/client.py)
        self.timeout = timeout
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._lock = threading.Lock()

    def refresh(self, topics: list[str] | None = None, *, allow_auto_create: bool = True,
                timeout: float | None = None) -> None:
        """Fetch metadata for `topics` (None: every topic) and merge it into the cache.

        Tries the known brokers and the bootstrap list until one answers or `timeout`
        (default: the cluster's) passes; a tiny timeout makes it a single pass.
        """
        body = self._request_metadata(topics, allow_auto_create, self.timeout if timeout is None else timeout)
        with self._lock:
            self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port) for b in body.brokers}
            self.cluster_id = body.cluster_id
            self.controller_id = body.controller_id
            fresh = {}
            for t in body.topics:
                parts = sorted(t.partitions, key=lambda p: p.partition_index)
                fresh[t.name] = TopicInfo(t.name, tuple(p.leader_id for p in parts), t.error_code,
                                          tuple(tuple(p.replica_nodes) for p in parts),
                                          tuple(tuple(p.isr_nodes) for p in parts))
            if topics is None:
                self.topics = fresh
            else:
                self.topics.update(fresh)

    def _request_metadata(self, topics, allow_auto_create, timeout: float):
        request = metadata.REQUEST(topics=None if topics is None else [{"name": t} for t in topics],
                                   allow_auto_topic_creation=allow_auto_create)
        return self.request_any(metadata.API_KEY, METADATA_VERSION, request, timeout)

    def request_any(self, api_key: int, version: int, request, timeout: float):
        """The answer of the first broker that gives one (known brokers, then the bootstrap list), trying
        until `timeout` passes (ConnectionClosed then)."""
        candidates = [(b.host, b.port) for b in self.brokers.values()] + self.bootstrap
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            for host, port in candidates:
                try:
                    with BrokerConnection(host, port, client_id=self.client_id, security=self.security,
                                          timeout=max(1.0, min(10.0, deadline - time.monotonic())),
                                          connect_timeout=max(0.5, min(5.0, deadline - time.monotonic()))) as conn:
                        return conn.request(api_key, version, request)
                except (SaslAuthenticationFailed, UnsupportedSaslMechanism, IllegalSaslState):
                    raise  # refused credentials do not get better by asking again (Kafka's clients stop too)
                except (ConnectionClosed, KafkaError, OSError, ProtocolError) as exc:
                    last = exc  # ProtocolError: something that is not a broker listens there
                if time.monotonic() >= deadline:
                    break
            if time.monotonic() >= deadline:
                where = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
                raise ConnectionClosed(f"no broker reachable at {where} within {timeout:g} s ({last})")
            time.sleep(0.1)

    def topic(self, name: str, *, allow_auto_create: bool = True, wait: float | None = None) -> TopicInfo:
        """The topic's partitions and leaders, fetching metadata while it is unknown or being created."""
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        while True:
            info = self.topics.get(name)
            if info is not None and info.error == 0 and info.leaders:
                return info  # some partitions may be leaderless (their broker is down): leader() says so
            if info is not None and info.error not in (0, LeaderNotAvailable.code) and (
                    info.error != UnknownTopicOrPartition.code or not allow_auto_create):
                raise error_for_code(info.error, f"topic {name!r}")
            if time.monotonic() >= deadline:
                if info is None or info.error == UnknownTopicOrPartition.code:
                    raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
                raise LeaderNotAvailable(f"topic {name!r} has no leader")
            self.refresh([name], allow_auto_create=allow_auto_create)
            if name in self.topics and self.topics[name].error not in (0,):
                time.sleep(0.05)

    def partitions_for(self, topic: str) -> int:
        return self.topic(topic).partitions

    def leader(self, topic: str, partition: int) -> BrokerInfo:
        """The broker leading a partition (LeaderNotAvailable if it has none, or its broker is down).

        A look-up, never a creation: a missing topic is UnknownTopicOrPartition even where the
        broker auto-creates topics (a reader of a deleted topic must not bring it back)."""
        info = self.topic(topic, allow_auto_create=False)
        if not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartition(f"{topic} has no partition {partition}")
        node = info.leaders[partition]
        broker = self.brokers.get(node)
        if broker is None:
            raise LeaderNotAvailable(f"{topic}-{partition}: leader {node} is not a known broker")
        return broker

    def any_broker(self) -> BrokerInfo:
        """Some live broker (for admin requests that any broker answers)."""
        if not self.brokers:
            self.refresh([])
        return min(self.brokers.values(), key=lambda b: b.node_id)
