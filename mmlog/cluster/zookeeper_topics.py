"""Cluster mode: the topics in ZooKeeper. Every broker keeps its local catalogue in line with
`/brokers/topics` (topics made, re-made, grown, reassigned or deleted through any broker reach every
broker through its watches), and the topic admin writes there: CreateTopics spreads each partition's
replicas over the live brokers (`assignment.py`) and writes the assignment, the config and every
partition state in one multi-op transaction; CreatePartitions rewrites the topic node (compare-and-set)
with the new partitions' nodes and states; DeleteTopics removes them all in one transaction.
`ZooKeeperTopics` is a part of `ZooKeeperStore`, which holds the state named below."""

from __future__ import annotations

import logging
import uuid

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from mmlog.cluster import paths
from mmlog.cluster.assignment import assign_replicas, next_partitions
from mmlog.cluster.growth import check_growth
from mmlog.cluster.limits import PartitionLimits, hosted_replicas
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.errors import (InvalidPartitions, KafkaError, ReassignmentInProgress, TopicAlreadyExists,
                          UnknownTopicOrPartition)
from mmlog.log.manager import LogManager
from mmlog.cluster.zookeeper_state import ZooKeeperState

log = logging.getLogger(__name__)


class ZooKeeperTopics(ZooKeeperState):
    """The local topic catalogue synced with ZooKeeper's, and topics created, grown and deleted there."""

    def sync_topics(self) -> None:
        """Make the local catalogue match /brokers/topics (on the control thread, or at start-up)."""
        manager = self.manager
        names = set(self.zk.get_children(paths.TOPICS))
        local = manager.topics()
        for name in sorted(local.keys() - names):
            self._drop_local(name)
        for name in sorted(names):
            self._sync_topic(name)

    def _sync_topic(self, name: str) -> None:
        """Make one topic of the local catalogue match its ZooKeeper node: made, re-made (a new id) or
        grown (CreatePartitions made elsewhere), its partition states watched."""
        manager = self.manager
        try:
            data = self.zk.get(paths.topic(name))[0]
        except NoNodeError:
            return
        replicas, topic_id = paths.parse_assignment(data)
        info = manager.topics().get(name)
        if info is not None and info.topic_id == topic_id:
            if len(replicas) == info.partitions and replicas != info.assignment:
                self._reassigned(name, replicas)
            elif len(replicas) > info.partitions:
                try:
                    manager.add_partitions(name, len(replicas), replicas)
                    log.info("topic %s: grown to %d partitions", name, len(replicas))
                except KafkaError as exc:
                    log.error("cannot grow topic %s to %d partitions: %s", name, len(replicas), exc)
                    return
            self.states.track(name, topic_id, len(replicas))
            self._watch_topic(name, topic_id)
            return
        if info is not None:
            self._drop_local(name)  # deleted and created again while we looked away
        try:
            config = paths.load(self.zk.get(paths.topic_config(name))[0])["config"]
        except NoNodeError:
            config = {}
        try:
            manager.create_topic(name, len(replicas), config, assignment=replicas, topic_id=topic_id)
            here = sum(self.broker_id in r for r in replicas)
            log.info("topic %s: replicas of %d of %d partitions here", name, here, len(replicas))
        except KafkaError as exc:
            log.error("cannot create topic %s from ZooKeeper: %s", name, exc)
            return
        self.states.track(name, topic_id, len(replicas))
        self._watch_topic(name, topic_id)

    def _local(self, name: str):
        """The local catalogue's entry of a topic, None if it has none (cheap: watches call it per topic)."""
        try:
            return self.manager.topic(name)
        except UnknownTopicOrPartition:
            return None

    def _watch_topic(self, name: str, topic_id: str) -> None:
        """Watch a topic's node for growth (once per topic id): a partition count above the catalogue's
        syncs that topic on the control thread. The watch ends with the topic (another id, or none)."""
        if self._topic_watches.get(name) == topic_id:
            return
        self._topic_watches[name] = topic_id

        def changed(data, _stat, *_) -> bool:
            if self._topic_watches.get(name) != topic_id:
                return False
            if data is None:
                return True  # deleted: the topic list's watch drops it
            replicas, node_id = paths.parse_assignment(data)
            info = self._local(name)
            if node_id == topic_id and info is not None and (len(replicas) > info.partitions or
                                                             replicas[:info.partitions] != info.assignment):
                self._soon(lambda: self._sync_topic(name))  # grown, or replicas reassigned
            return True

        DataWatch(self.zk, paths.topic(name), changed)

        def config_changed(data, _stat, *_) -> bool:
            if self._topic_watches.get(name) != topic_id:
                return False
            info = self._local(name)
            if data is not None and info is not None and paths.load(data).get("config", {}) != info.config:
                self._soon(lambda: self._config_changed(name, topic_id, data))
            return True

        DataWatch(self.zk, paths.topic_config(name), config_changed)

    def _reassigned(self, name: str, replicas: list[list[int]]) -> None:
        """A topic's replicas changed (a reassignment): replicas new here are made, those no longer here
        let go and deleted, and every changed partition takes its role with its new replica set."""
        before = self.manager.topic(name).assignment
        changed = {(name, p) for p, r in enumerate(replicas) if r != before[p]}
        try:
            made, dropped = self.manager.reassign(name, replicas)
        except KafkaError as exc:
            log.error("cannot apply the new replicas of topic %s: %s", name, exc)
            return
        if made or dropped:
            log.info("topic %s: replicas made here %s, deleted here %s", name, made, dropped)
        self.replicas.drop(dropped)
        self.replicas.apply(changed)

    def _drop_local(self, name: str) -> None:
        self.states.untrack(name)
        self._topic_watches.pop(name, None)
        if self.replicas is not None:
            self.replicas.forget(name)
        self.manager.delete_topic(name)
        log.info("topic %s deleted", name)
        if self.control is not None:
            self.control.topic_deleted(name)

    def create_topic(self, manager: LogManager, name: str, partitions: int, configs: dict,
                     validate_only: bool = False, replication_factor: int = 1,
                     limits: PartitionLimits | None = None) -> None:
        """Check everything (the partition count first, before any allocation), create our replicas, then
        write ZooKeeper; a failure of either leaves neither (all or nothing)."""
        if limits is not None:
            limits.check_topic(name, partitions)
        overrides = manager.validate_topic(name, partitions, configs)
        live = sorted(self.view.brokers) or [self.broker_id]
        replicas = assign_replicas(live, partitions, replication_factor)
        if limits is not None:
            limits.check_hosting(name, hosted_replicas(manager, self.broker_id), partitions, replicas,
                                 self.broker_id)
        if self.zk.exists(paths.topic(name)):
            if not validate_only:
                self.sync_topics()  # made through another broker: have it here too before answering
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        if validate_only:
            return
        if name in manager.topics():
            self.sync_topics()  # deleted in ZooKeeper, our watch not run yet: drop it first
        topic_id = uuid.uuid4().hex
        # Our replicas first: if making them fails, the manager has removed what it made and ZooKeeper
        # never heard of the topic. A crash between the two leaves a local topic ZooKeeper does not
        # name, which sync_topics drops at the next start.
        manager.create_topic(name, partitions, overrides, assignment=replicas, topic_id=topic_id)
        try:
            self._write_topic(name, overrides, replicas, topic_id)
        except TopicAlreadyExists:
            manager.delete_topic(name)
            self.sync_topics()  # another broker made it meanwhile: have its topic here before answering
            raise
        except BaseException:
            manager.delete_topic(name)
            raise
        self.states.track(name, topic_id, partitions)

    def create_partitions(self, manager: LogManager, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False, limits: PartitionLimits | None = None) -> None:
        """Grow a topic (CreatePartitions): the new partitions' replicas spread on as Kafka spreads them
        (`assignment.next_partitions`) unless given; the topic node (compare-and-set on its version), the
        new partitions' nodes and states in one transaction; then applied here before answering (the
        other brokers apply it through their watch on the topic node)."""
        for _ in range(5):
            try:
                data, stat = self.zk.get(paths.topic(name))
            except NoNodeError:
                raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.") from None
            existing, topic_id = paths.parse_assignment(data)
            if any(paths.parse_reassigning(data)):  # the topic node would lose the move (Kafka refuses too)
                raise ReassignmentInProgress(f"topic {name!r}: a partition reassignment is in progress")
            live = sorted(self.view.brokers) or [self.broker_id]
            new = check_growth(name, len(existing), count, assignments, live, len(existing[0]))
            if new is None:
                new = next_partitions(live, existing, count)
            if limits is not None:
                limits.check_topic(name, count - len(existing))
                limits.check_hosting(name, hosted_replicas(manager, self.broker_id), count - len(existing),
                                     new, self.broker_id)
            if validate_only:
                return
            tx = self.zk.transaction()
            tx.set_data(paths.topic(name), paths.assignment(existing + new, topic_id), version=stat.version)
            for p, nodes in enumerate(new, start=len(existing)):
                tx.create(paths.partition(name, p))
                tx.create(paths.partition_state(name, p),
                          LeaderAndIsr(nodes[0], 0, tuple(nodes), self._controller_epoch).to_json())
            results = tx.commit()
            failed = [r for r in results if isinstance(r, Exception)]
            if not failed:
                log.info("topic %s: %d partitions added, replicas %s", name, len(new), new)
                self._sync_topic(name)
                return
            if not isinstance(results[0], (BadVersionError, NoNodeError)):
                raise failed[0]
            # the topic changed (grown or deleted through another broker) between our read and write: again
        raise InvalidPartitions(f"topic {name!r} kept changing while its partitions were being added")

    def _write_topic(self, name: str, overrides: dict, replicas: list[list[int]], topic_id: str) -> None:
        """The config, the assignment and every partition state in one transaction."""
        tx = self.zk.transaction()
        tx.create(paths.topic_config(name), paths.dump({"version": 1, "config": overrides}))
        tx.create(paths.topic(name), paths.assignment(replicas, topic_id))
        tx.create(paths.topic_partitions(name))
        for p, nodes in enumerate(replicas):
            tx.create(paths.partition(name, p))
            tx.create(paths.partition_state(name, p),
                      LeaderAndIsr(nodes[0], 0, tuple(nodes), self._controller_epoch).to_json())
        results = tx.commit()
        if any(isinstance(r, NodeExistsError) for r in results):
            raise TopicAlreadyExists(f"topic {name!r} already exists")  # another broker made it meanwhile
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise failed[0]

    def delete_topic(self, manager: LogManager, name: str) -> None:
        try:
            children = self.zk.get_children(paths.topic_partitions(name))
        except NoNodeError:
            if not self.zk.exists(paths.topic(name)):
                raise UnknownTopicOrPartition(f"unknown topic {name!r}") from None
            children = []
        tx = self.zk.transaction()
        for p in children:
            if self.zk.exists(paths.partition_state(name, int(p))):
                tx.delete(paths.partition_state(name, int(p)))
            tx.delete(paths.partition(name, int(p)))
        if children:
            tx.delete(paths.topic_partitions(name))
        tx.delete(paths.topic(name))
        if self.zk.exists(paths.topic_config(name)):
            tx.delete(paths.topic_config(name))
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if failed:
            raise UnknownTopicOrPartition(f"topic {name!r} changed while being deleted: {failed[0]!r}")
        if name in manager.topics():
            manager.delete_topic(name)
