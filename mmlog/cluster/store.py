"""What the broker asks of its metadata store: `MetadataStore`, the methods and attributes the control
plane, the boot, the transaction coordinator and the metrics use. Two stores implement it: the embedded
store (standalone: files in the data dir, `embedded_store.py`) and the ZooKeeper store (a cluster,
Kafka's paths, `zookeeper_store.py`); tests/cluster/test_store_protocol.py checks that both do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from mmlog.cluster.limits import PartitionLimits
from mmlog.coordinator.offsets import OffsetStore
from mmlog.ipc.cluster_view import Endpoint
from mmlog.log.manager import LogManager

if TYPE_CHECKING:  # kazoo only in cluster mode: a standalone broker never imports them
    from mmlog.cluster.partition_states import PartitionStates
    from mmlog.cluster.replicas import ReplicaManager


class MetadataStore(Protocol):
    """Where a broker's cluster-wide facts live, and who it asks to change them."""

    cluster_id: str
    """The cluster's id, agreed with meta.properties (and ZooKeeper) when the store opened."""
    clustered: bool
    """True for a store that other brokers share (ZooKeeper), False for a broker alone."""
    is_controller: bool
    """Whether this broker is the cluster's controller now (a broker alone always is)."""
    states: PartitionStates | None
    """Every partition's leader and ISR as the cluster holds them; None for a broker alone."""
    replicas: ReplicaManager | None
    """This broker's replicas' roles and the replica fetcher's plan; None for a broker alone."""
    wake: Callable[[], None]
    """Set by the control plane: wakes the processors when the store changed what they serve."""

    def check_catalogue(self, manager: LogManager) -> None:
        """Refuse a data dir whose topics belong to the other mode; in a cluster, sync the catalogue."""

    def offset_store(self, call_soon: Callable) -> OffsetStore:
        """The group coordinator's committed offsets, not loaded yet."""

    def start(self, control: Any, me: Endpoint) -> None:
        """Register this broker and publish the first view (before the control thread runs)."""

    def bind_thread(self) -> None:
        """Give the calling thread's remote calls a deadline (the control thread, the topic worker)."""

    def timers(self) -> list[tuple[float, Callable[[], None], str]]:
        """The periodic cluster work: (interval ms, fn, name)."""

    def sync_topics(self) -> None:
        """Bring the local catalogue in line with the store's topics."""

    def owns_group(self, group_id: str) -> bool:
        """Whether this broker coordinates the group now."""

    def live_brokers(self) -> int:
        """How many brokers are alive in the cluster."""

    def marker_address(self, topic: str, partition: int) -> tuple[str, int] | None:
        """Where a transaction marker for a partition (or a group) goes; None while nobody leads it."""

    def next_producer_id(self) -> int:
        """A producer id no broker of the cluster has handed out before."""

    def create_topic(self, manager: LogManager, name: str, partitions: int, configs: dict,
                     validate_only: bool = False, replication_factor: int = 1,
                     limits: PartitionLimits | None = None) -> None:
        """CreateTopics: check everything, then create the topic, all or nothing."""

    def delete_topic(self, manager: LogManager, name: str) -> None:
        """DeleteTopics: the topic goes, here and in the cluster."""

    def create_partitions(self, manager: LogManager, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False, limits: PartitionLimits | None = None) -> None:
        """CreatePartitions: grow a topic to `count` partitions, all or nothing."""

    def alter_topic_config(self, manager: LogManager, name: str, overrides: dict[str, str]) -> None:
        """Replace a topic's config overrides, stored and applied."""

    def alter_broker_config(self, manager: LogManager, level: str, values: dict[str, str]) -> None:
        """Replace one level of the dynamic broker configs (this broker's or the default)."""

    def set_client_quotas(self, manager: LogManager, quotas: dict[str, dict]) -> None:
        """Replace the client quotas (entity path -> {key: value})."""

    def alter_scram_credentials(self, deletions, upsertions) -> dict:
        """AlterUserScramCredentials: store the users' changes; the results per user."""

    def create_acls(self, bindings) -> list[tuple[int, str | None]]:
        """CreateAcls: store the bindings; (error code, message) for each."""

    def delete_acls(self, filters) -> list[list]:
        """DeleteAcls: remove the bindings each filter matches; those removed, per filter."""

    def elect_leaders(self, manager: LogManager, election_type: int, keys: list[tuple[str, int]] | None) -> dict:
        """ElectLeaders: {(topic, p): None or the partition's KafkaError}; keys None means every partition."""

    def alter_reassignments(self, manager: LogManager, requests: list[tuple[str, int, list[int] | None]]) -> dict:
        """AlterPartitionReassignments: {(topic, p): None or the partition's KafkaError}."""

    def list_reassignments(self, manager: LogManager, keys=None) -> dict:
        """ListPartitionReassignments: {(topic, p): the ongoing reassignment}."""

    def replicas_offline(self, keys) -> None:
        """Our replicas of `keys` sit on a failed log dir: tell the cluster."""

    def controlled_shutdown(self) -> None:
        """The broker is stopping: hand over what it leads."""

    def close(self) -> None:
        """Release the store (end the session)."""
