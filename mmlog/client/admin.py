"""Admin: create, delete, list and describe topics, look up partition offsets, and inspect consumer groups.

Topic changes go to the controller (any broker answers when there is one); offset
look-ups (ListOffsets) go to each partition's leader; group questions
(DescribeGroups, OffsetFetch) go to the group's coordinator, found with
FindCoordinator, and ListGroups to every broker; ACLs (CreateAcls, DescribeAcls,
DeleteAcls) to any broker. Errors come back as the typed exceptions of
`mmlog.errors`, carrying their Kafka error code.

`Admin` holds the topics and the plumbing; its other operations are mixins, a module each:
offsets (`admin_offsets.py`), broker configs and quotas (`admin_configs.py`), consumer groups
(`admin_groups.py`), elections, reassignments and throttles (`admin_replicas.py`), SCRAM users
and ACLs (`admin_security.py`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from mmlog.security.client import ClientSecurity
from mmlog.client.admin_configs import ConfigAdmin
from mmlog.client.admin_groups import GroupAdmin
from mmlog.client.admin_offsets import EARLIEST, LATEST, OffsetAdmin
from mmlog.client.admin_replicas import ReplicaAdmin
from mmlog.client.admin_security import SecurityAdmin
from mmlog.client.cluster import Cluster
from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.errors import error_for_code
from mmlog.protocol.messages import (create_partitions, create_topics, delete_topics, describe_configs,
                                     incremental_alter_configs)

TOPIC_RESOURCE = 2  # DescribeConfigs / IncrementalAlterConfigs resource type


@dataclass
class PartitionDescription:
    partition: int
    leader: int
    earliest: int
    latest: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    config: dict[str, str] = field(default_factory=dict)
    overrides: set[str] = field(default_factory=set)  # config names set on the topic (not defaults)


class Admin(OffsetAdmin, ConfigAdmin, GroupAdmin, ReplicaAdmin, SecurityAdmin):
    """Topic administration and offset look-ups against a cluster."""

    def __init__(self, bootstrap: str = "127.0.0.1:9092", *, client_id: str = "mmlog-admin",
                 timeout: float = 30.0, **security) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, timeout=timeout,
                               security=ClientSecurity.from_options(**security))
        self.timeout = timeout
        self._conns: dict[int, BrokerConnection] = {}

    # ------------------------------------------------------------ topics

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     replication_factor: int = -1) -> None:
        """Create one topic (TopicAlreadyExists, InvalidTopic, InvalidConfig, ... on failure)."""
        self.create_topics({name: (partitions, config or {})}, replication_factor)

    def create_topics(self, topics: dict[str, tuple[int, dict[str, str]]], replication_factor: int = -1) -> None:
        body = self._request(self._controller(), create_topics.API_KEY, 4, create_topics.REQUEST(
            timeout_ms=int(self.timeout * 1000), validate_only=False, topics=[
                {"name": name, "num_partitions": n, "replication_factor": replication_factor, "assignments": [],
                 "configs": [{"name": k, "value": str(v)} for k, v in cfg.items()]}
                for name, (n, cfg) in topics.items()]))
        self._raise_first((t.error_code, f"{t.name}: {t.error_message or ''}".rstrip(": ")) for t in body.topics)

    def delete_topic(self, name: str) -> None:
        self.delete_topics([name])

    def delete_topics(self, names: list[str]) -> None:
        body = self._request(self._controller(), delete_topics.API_KEY, 3, delete_topics.REQUEST(
            topic_names=list(names), timeout_ms=int(self.timeout * 1000)))
        self._raise_first((r.error_code, r.name) for r in body.responses)

    def create_partitions(self, counts: dict[str, int], validate_only: bool = False) -> None:
        """Grow topics to new partition counts (InvalidPartitions if a count does not grow; with validate_only
        only checked). Keys map to other partitions afterwards: murmur2(key) % the new count."""
        body = self._request(self._controller(), create_partitions.API_KEY, 1, create_partitions.REQUEST(
            timeout_ms=int(self.timeout * 1000), validate_only=validate_only, topics=[
                {"name": name, "count": count, "assignments": None} for name, count in counts.items()]))
        self._raise_first((r.error_code, f"{r.name}: {r.error_message or ''}".rstrip(": ")) for r in body.results)

    def alter_topic_config(self, name: str, set: dict[str, str] | None = None, delete: list[str] = (),
                           validate_only: bool = False) -> None:
        """Set and delete (back to the default) topic config overrides (IncrementalAlterConfigs); running
        partitions take them without a restart. InvalidConfig for an unknown name or a bad value."""
        configs = [{"name": k, "config_operation": 0, "value": str(v)} for k, v in (set or {}).items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in delete]
        body = self._request(self._controller(), incremental_alter_configs.API_KEY, 0,
                             incremental_alter_configs.REQUEST(validate_only=validate_only, resources=[
                                 {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": configs}]))
        self._raise_first((r.error_code, f"{r.resource_name}: {r.error_message or ''}".rstrip(": "))
                          for r in body.responses)

    def list_topics(self) -> dict[str, int]:
        """Every topic and its partition count."""
        self.cluster.refresh(None)
        return {name: info.partitions for name, info in sorted(self.cluster.topics.items()) if info.error == 0}

    def describe_topic(self, name: str) -> TopicDescription:
        """Partitions (leader, earliest and latest offsets) and the effective config of a topic."""
        self.cluster.refresh([name], allow_auto_create=False)
        info = self.cluster.topic(name, allow_auto_create=False, wait=0)
        earliest = self.offsets(name, EARLIEST, offline=-1)
        latest = self.offsets(name, LATEST, offline=-1)
        parts = [PartitionDescription(p, info.leaders[p], earliest[p], latest[p],
                                      info.replicas[p] if info.replicas else (), info.isr[p] if info.isr else ())
                 for p in range(info.partitions)]
        config, overrides = self.topic_config(name)
        return TopicDescription(name, parts, config, overrides)

    def topic_config(self, name: str) -> tuple[dict[str, str], set[str]]:
        """(effective config, names overridden on the topic), Kafka names."""
        body = self._request(self._controller(), describe_configs.API_KEY, 1, describe_configs.REQUEST(
            resources=[{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}]))
        [result] = body.results
        if result.error_code:
            raise error_for_code(result.error_code, result.error_message or name)
        config = {c.name: c.value for c in result.configs}
        overrides = {c.name for c in result.configs if c.config_source == 1}
        return config, overrides

    # ------------------------------------------------------------ plumbing

    def _controller(self) -> int:
        """The controller's node id, or any live broker's (every broker answers topic admin)."""
        if not self.cluster.brokers:
            self.cluster.refresh([])
        if self.cluster.controller_id in self.cluster.brokers:
            return self.cluster.controller_id
        return self.cluster.any_broker().node_id

    def _request(self, node_id: int, api_key: int, version: int, body):
        """One request to a broker; if its connection fails, forget it and refresh metadata before raising."""
        try:
            return self._conn(node_id).request(api_key, version, body)
        except (ConnectionClosed, OSError):
            conn = self._conns.pop(node_id, None)
            if conn is not None:
                conn.close()
            with contextlib.suppress(ConnectionClosed):  # no broker answers either: raise the first failure
                self.cluster.refresh([], timeout=1.0)
            raise

    def _conn(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is None:
            broker = self.cluster.brokers[node_id]
            conn = self._conns[node_id] = BrokerConnection(broker.host, broker.port, client_id=self.cluster.client_id,
                                                           timeout=self.timeout, security=self.cluster.security)
        return conn

    @staticmethod
    def _raise_first(results) -> None:
        for code, what in results:
            if code:
                raise error_for_code(code, what)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
