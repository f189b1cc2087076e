"""Cluster mode: a broker's cluster-wide facts in ZooKeeper.

What this broker does there, all from the main process:

- At start-up: agree on the cluster id (`/cluster/id`, created by the first broker,
  checked against `meta.properties`), then bring the local topic catalogue in line
  with `/brokers/topics` (topics deleted while we were away go, new ones are
  created with the partitions assigned to us) before any processor serves.
- Register `/brokers/ids/<id>` (ephemeral: it goes when our session does) and run
  for controller (`/controller`, ephemeral, first one wins).
- Watch the broker registry, the controller and the topic list. Every change is
  handled on the control thread: the view of live brokers is republished for the
  processors (`ipc/cluster_view.py`), the group coordinator drops groups that moved
  away, topics are synced, and the controller rewrites partition states.
- Topic admin: CreateTopics on any broker spreads each partition's replicas over
  the live brokers as Kafka does (`assignment.py`) and writes the assignment, the
  config and every partition state in one multi-op transaction; DeleteTopics
  removes them in one transaction. Every broker applies both through its watch.
  CreatePartitions rewrites the topic node (compare-and-set) with the new
  partitions' nodes and states in one transaction; each broker watches every
  topic node and grows its catalogue when the count there is higher.
  AlterConfigs writes `/config/topics/<name>`; each broker watches it and applies
  the overrides to its running partitions. Dynamic broker configs and client
  quotas go through `/config/brokers`, `/config/clients`, `/config/users` and the
  change notifications under `/config/changes` (`dynamic_configs.py`). ACLs live in
  Kafka's `/kafka-acl` nodes, mirrored to every broker's acls.json (`acls.py`).
- Replication: every broker watches every partition state node
  (`partition_states.py`); the changes of its own replicas become roles, ISR
  proposals and the replica fetcher's plan (`replicas.py`), and all of them go to
  the processors in the published view, for Metadata. The controller elects
  leaders when brokers come and go, and gives leadership back to preferred
  replicas on a timer (`controller.py`); it alone answers ElectLeaders and carries
  partition reassignments through (`reassignment.py`), others answer NOT_CONTROLLER.
  A topic node whose replicas changed (a reassignment) is applied by every broker:
  replicas new here are made and follow, replicas no longer here are deleted.
- Producer id blocks come from `/latest_producer_id_block`, claimed with a
  versioned compare-and-set so no two brokers hand out the same ids.

A SIGTERM is a controlled shutdown: before the processors stop, this broker hands
the partitions it leads to live ISR members and leaves every ISR (`leave`).

Session loss: kazoo reconnects with a new session; the registration and the
controller candidacy are then made again (the watches re-arm themselves).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from mmlog.ipc.cluster_view import ClusterView, Endpoint
from mmlog.security import users as users_module
from mmlog.cluster.limits import PartitionLimits, hosted_replicas
from mmlog.cluster.embedded_store import ClusterError, load_meta, new_cluster_id, stored_cluster_id
from mmlog.cluster import paths, session
from mmlog.security.zookeeper_acls import ZooKeeperAcls
from mmlog.cluster.growth import check_growth
from mmlog.cluster.assignment import assign_replicas, next_partitions
from mmlog.cluster.controller import Controller
from mmlog.cluster.dynamic_configs import DynamicConfigs, update_config
from mmlog.config.broker import BROKER_SETTINGS
from mmlog.config.settings import ConfigError
from mmlog.cluster.offset_store import ZooKeeperOffsetStore
from mmlog.cluster.partition_states import PartitionStates
from mmlog.cluster.reassignment import Reassignments
from mmlog.cluster.paths import LeaderAndIsr
from mmlog.cluster.replicas import ReplicaManager
from mmlog.errors import (InvalidPartitions, KafkaError, MetadataStoreUnreachable, NotController,
                          ReassignmentInProgress, TopicAlreadyExists, UnknownTopicOrPartition)
from mmlog.log.manager import LogManager
from mmlog.security import credentials, scram

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


class BrokerIdInUse(ClusterError):
    """Another live broker is registered under our broker.id."""


class ZooKeeperStore:
    """The control plane's store in cluster mode (the same methods as `EmbeddedStore`)."""

    def __init__(self, config, data_dir: Path) -> None:
        self.broker_id = config["broker.id"]
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.session_ms = config["zookeeper.session.timeout.ms"]
        self.zk = session.connect(config["zookeeper.connect"], self.session_ms,
                                  config["zookeeper.connection.timeout.ms"])
        try:
            self.cluster_id = self._agree_cluster_id(config["cluster.id"])
        except Exception:
            self.close()
            raise
        self.view = ClusterView({}, -1)
        self.manager: LogManager | None = None
        self.control = None
        self.me: Endpoint | None = None
        self.offsets: ZooKeeperOffsetStore | None = None
        self.is_controller = False
        self._session_lost = False
        self._next_id = self._block_end = 0
        self.config = config
        self.states = PartitionStates(self.zk, self._soon, self._states_changed)
        self.controller = Controller(self.zk, self.states, config["unclean.leader.election.enable"])
        self.dynamic = DynamicConfigs(self.zk, self.broker_id)
        self.reassignments = Reassignments(self.zk, self.states, self.controller)
        self.acls = ZooKeeperAcls(self.zk, self.dir, lambda fn: self._soon(fn))
        self.replicas: ReplicaManager | None = None
        self._offline_keys: set[tuple[str, int]] = set()  # our replicas on failed log dirs
        self._topic_watches: dict[str, str] = {}  # topic -> the topic id its growth watch serves
        self.wake = lambda: None  # set by the control plane once the processors' wake board exists

    @property
    def _controller_epoch(self) -> int:
        return self.controller.epoch

    # ------------------------------------------------------------ start-up

    def _agree_cluster_id(self, wanted: str) -> str:
        cluster = self._read_json(paths.CLUSTER_ID, "id", None)
        if cluster is None:
            cluster = wanted or stored_cluster_id(self.dir) or new_cluster_id()
            try:
                self.zk.create(paths.CLUSTER_ID, paths.dump({"version": "1", "id": cluster}), makepath=True)
            except NodeExistsError:
                cluster = self._read_json(paths.CLUSTER_ID, "id", None)
        if wanted and wanted != cluster:
            raise ClusterError(f"cluster.id {wanted} differs from ZooKeeper's cluster id {cluster}")
        return load_meta(self.dir, self.broker_id, cluster)

    def check_catalogue(self, manager: LogManager) -> None:
        """Standalone topics (no assignment) cannot join a cluster; then sync with ZooKeeper."""
        alone = sorted(name for name, t in manager.topics().items() if t.assignment is None)
        if alone:
            raise ClusterError(f"data dir holds standalone topics ({', '.join(alone[:3])}); "
                             "a cluster cannot adopt them: use a fresh data dir")
        self.manager = manager
        self.replicas = ReplicaManager(self.broker_id, manager, self.states, self.zk,
                                       self.config["replica.lag.time.max.ms"], lambda: self.wake(),
                                       self.config.inter_broker_listener.name)
        self.sync_topics()

    def offset_store(self, call_soon: Callable) -> ZooKeeperOffsetStore:
        self.offsets = ZooKeeperOffsetStore(self.zk, call_soon)
        return self.offsets

    def start(self, control, me: Endpoint) -> None:
        """Register, run for controller, publish the first view, and watch (call before the control thread runs)."""
        self.control, self.me = control, me
        self._mirror_users()  # before others can see us: their inter-broker logins need the credentials here
        self.acls.start()  # and the ACLs that authorise them
        self._register()
        self._run_for_controller()
        self._refresh_view()
        self.states.drain()  # watches that fired before there was a control thread
        self._states_changed({(t, p) for t in self.states.topics() for p in range(self.manager.topic(t).partitions)})
        self.zk.add_listener(self._state_changed)
        control.on_dynamic.append(self._dynamic_applied)
        self._load_dynamic()
        ChildrenWatch(self.zk, paths.CONFIG_CHANGES, lambda _: self._soon(self._load_dynamic))
        ChildrenWatch(self.zk, paths.BROKER_IDS, lambda _: self._soon(self._membership_changed))
        DataWatch(self.zk, paths.CONTROLLER, lambda *_: self._soon(self._controller_changed))
        ChildrenWatch(self.zk, paths.TOPICS, lambda _: self._soon(self.sync_topics))
        ChildrenWatch(self.zk, paths.OFFLINE_REPLICAS, lambda _: self._soon(self._elect))
        self._user_watches: set[str] = set()
        ChildrenWatch(self.zk, paths.USER_CONFIGS, self._users_changed)

    def _soon(self, fn: Callable[[], None]) -> None:
        """Watches fire on kazoo's thread: do the work on the control thread (returning keeps the watch).
        Before the control thread exists (start-up), `start` does what they asked for."""
        if self.control is not None:
            self.control.run_soon(fn)

    def timers(self) -> list[tuple[float, Callable[[], None], str]]:
        """The control plane's periodic work in cluster mode: (interval ms, fn, name)."""
        lag = self.config["replica.lag.time.max.ms"]
        timers = [(min(lag / 2, 250), self.replicas.check_isr, "ISR check"),
                  (self.config["replica.high.watermark.checkpoint.interval.ms"],
                   self.manager.checkpoint_high_watermarks, "high watermark checkpoint"),
                  (1000, self._reassign, "partition reassignments")]
        if self.config["auto.leader.rebalance.enable"]:
            timers.append((self.config["leader.imbalance.check.interval.seconds"] * 1000,
                           lambda: self._elect(preferred=True), "preferred leader election"))
        return timers

    def bind_thread(self) -> None:
        """The calling thread (the control thread, the topic worker) must not wait out a partition: its
        ZooKeeper calls get a deadline and are refused while the connection is down (`session.py`)."""
        self.zk.bind_thread()

    def _register(self) -> None:
        """Create our ephemeral registration, waiting out the session of a previous run of ours."""
        path, data = paths.broker(self.broker_id), paths.registration(self.me.host, self.me.port, self.me.rack,
                                                                 self.me.listeners, self.config.protocol_map)
        deadline = time.monotonic() + self.session_ms / 1000 + 5
        while True:
            try:
                self.zk.create(path, data, ephemeral=True)
                log.info("registered %s in ZooKeeper as %s:%d", path, self.me.host, self.me.port)
                self._note_registration(path)
                self._publish_offline()  # a new session: the offline replicas' node went with the old one
                return
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    self.zk.set(path, data)
                    self._note_registration(path)
                    return
                if time.monotonic() > deadline:
                    raise BrokerIdInUse(f"broker.id {self.broker_id} is registered by another live broker") from None
                time.sleep(0.2)

    def _note_registration(self, path: str) -> None:
        """Our broker epoch: partition states written before it say nothing we may lead by."""
        stat = self.zk.exists(path)
        if stat is not None and self.replicas is not None:
            self.replicas.registered_zxid = stat.czxid

    def _state_changed(self, state: str) -> None:
        """kazoo's connection listener (its thread; no ZooKeeper calls here). Each change is an event of
        the network, logged as one line: the control thread's calls meanwhile are refused (`session.py`)."""
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost: registering again once connected")
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection lost: ZooKeeper work waits for it (session timeout %d ms)",
                        self.session_ms)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._soon(self._rejoin)
        elif state == KazooState.CONNECTED:
            log.info("ZooKeeper connection back within the session")
            self._soon(self._membership_changed)  # what watch work the outage made fail, done now

    def _rejoin(self) -> None:
        """A new session: read again what watches report, then register as at start-up.

        Work a watch queued while the session was going (a paused broker wakes to a dead session)
        failed on it and is gone, and kazoo re-runs a children watch only if the children differ from
        what it last saw: a topic whose creation was seen but not synced would stay unknown here.
        If ZooKeeper goes away again half way, the next connection (or, still connected, a retry in a
        second) starts it over: a broker must not stay unregistered."""
        log.info("ZooKeeper session re-established: reading the cluster again and registering")
        self.is_controller = False
        try:
            self._mirror_users()
            self.acls.mirror()
            self.sync_topics()
            self._load_dynamic()
            self._register()
            self._run_for_controller()  # writes the partition states if elected
            self._refresh_view()
        except MetadataStoreUnreachable as exc:
            log.warning("registering again postponed: %s", exc)
            self._session_lost = not self.zk.connected  # then the next CONNECTED rejoins
            if not self._session_lost:
                retry = threading.Timer(1.0, lambda: self._soon(self._rejoin))
                retry.daemon = True
                retry.start()

    # ------------------------------------------------------------ controller

    def _run_for_controller(self) -> None:
        try:
            self.zk.create(paths.CONTROLLER, paths.controller(self.broker_id), ephemeral=True)
        except NodeExistsError:
            return
        self.is_controller = True
        self.controller.epoch, self.controller.epoch_version = self._bump_controller_epoch()
        log.info("elected controller (epoch %d)", self._controller_epoch)
        self._elect()
        self.reassignments.load()  # what a previous controller started goes on
        self._reassign()

    def _bump_controller_epoch(self) -> tuple[int, int]:
        """(our controller epoch, the version of /controller_epoch holding it: our writes check it)."""
        while True:
            try:
                data, stat = self.zk.get(paths.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(paths.CONTROLLER_EPOCH, b"1")
                    return 1, 0
                except NodeExistsError:
                    continue
            try:
                new = self.zk.set(paths.CONTROLLER_EPOCH, b"%d" % (int(data) + 1), version=stat.version)
                return int(data) + 1, new.version
            except BadVersionError:
                continue

    def _controller_changed(self) -> None:
        holder = self._controller_id()
        if holder != self.broker_id:
            self.is_controller = False
        if holder == -1:
            self._run_for_controller()
        self._refresh_view()

    def _controller_id(self) -> int:
        return self._read_json(paths.CONTROLLER, "brokerid", -1)

    def _read_json(self, path: str, field: str, missing):
        """One field of a JSON node, or `missing` when there is no node."""
        try:
            return paths.load(self.zk.get(path)[0])[field]
        except NoNodeError:
            return missing

    def _elect(self, preferred: bool = False) -> None:
        """Controller: decide every partition's leader for the live brokers (controller.py), replicas
        on failed log dirs counted as dead."""
        if self.is_controller:
            live = set(self._live_ids())
            self.controller.elect(live, self.manager.topics(), preferred, self._offline_replicas(),
                                  set(self.reassignments.ongoing), self._registrations(live))

    def _reassign(self, keys=None) -> None:
        """Controller: finish the reassignments (of `keys`) whose target replicas are all in the ISR."""
        if self.is_controller and self.reassignments.ongoing:
            self.reassignments.progress(set(self._live_ids()), keys)

    def _require_controller(self) -> None:
        if not self.is_controller:
            raise NotController(f"broker {self.broker_id} is not the controller (broker {self._controller_id()} is)")

    def elect_leaders(self, manager: LogManager, election_type: int, keys: list[tuple[str, int]] | None) -> dict:
        """ElectLeaders (controller only): {(topic, p): None or the partition's KafkaError}; None: every partition."""
        self._require_controller()
        topics = self.manager.topics()
        if keys is None:
            keys = [(t, p) for t, info in topics.items() for p in range(info.partitions)]
        out: dict = {}
        asked = {}
        for t, p in keys:
            info = topics.get(t)
            if info is None or info.assignment is None or not 0 <= p < info.partitions or not self.states.get(t, p):
                out[t, p] = UnknownTopicOrPartition(f"The partition {t}-{p} does not exist.")
            else:
                asked[t, p] = info.assignment[p]
        out.update(self.controller.elect_requested(set(self._live_ids()), asked, election_type))
        return out

    def alter_reassignments(self, manager: LogManager, requests: list[tuple[str, int, list[int] | None]]) -> dict:
        """AlterPartitionReassignments (controller only): {(topic, p): None or the partition's KafkaError}."""
        self._require_controller()
        live = set(self._live_ids())
        out: dict = {}
        for t, p, target in requests:
            try:
                self.reassignments.alter(t, p, target, live)
                out[t, p] = None
            except KafkaError as exc:
                out[t, p] = exc
        return out

    def list_reassignments(self, manager: LogManager, keys=None) -> dict:
        """ListPartitionReassignments (controller only): {(topic, p): Ongoing}."""
        self._require_controller()
        return self.reassignments.listing(keys)

    def _offline_replicas(self) -> dict[tuple[str, int], set[int]]:
        """{(topic, partition): broker ids} from every broker's /brokers/offline_replicas node."""
        out: dict[tuple[str, int], set[int]] = {}
        for child in self.zk.get_children(paths.OFFLINE_REPLICAS):
            try:
                doc = paths.load(self.zk.get(paths.offline_replicas(int(child)))[0])
            except (NoNodeError, ValueError):
                continue
            for topic, p in doc.get("partitions", []):
                out.setdefault((topic, p), set()).add(int(child))
        return out

    def replicas_offline(self, keys) -> None:
        """Our replicas of `keys` sit on a failed log dir: tell the controller, which moves their
        leadership and drops us from their ISR (the node is ephemeral: it goes with our session)."""
        self._offline_keys |= set(keys)
        self._publish_offline()

    def _publish_offline(self) -> None:
        if not self._offline_keys:
            return
        path = paths.offline_replicas(self.broker_id)
        data = paths.dump({"partitions": sorted([t, p] for t, p in self._offline_keys)})
        try:
            self.zk.delete(path)  # delete and create, so the controller's children watch fires
        except NoNodeError:
            pass
        self.zk.create(path, data, ephemeral=True)
        log.warning("told the controller that %d of our replicas are offline", len(self._offline_keys))

    # ------------------------------------------------------------ membership and the view

    def _live_ids(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(paths.BROKER_IDS))

    def _registrations(self, live) -> dict[int, int]:
        """{broker id: the czxid of its registration} (Kafka's broker epoch): a broker registered after a
        partition state was written has restarted or lost its session since (controller.decide)."""
        out = {}
        for broker in live:
            stat = self.zk.exists(paths.broker(broker))
            if stat is not None:
                out[broker] = stat.czxid
        return out

    def _membership_changed(self) -> None:
        self._refresh_view()
        self._elect()
        self._reassign()

    def _refresh_view(self) -> None:
        brokers = {}
        for node in self._live_ids():
            try:
                doc = paths.load(self.zk.get(paths.broker(node))[0])
            except NoNodeError:
                continue
            brokers[node] = Endpoint(node, doc["host"], doc["port"], doc.get("rack"),
                                     paths.registration_listeners(doc))
        controller = self._controller_id()
        if (brokers, controller) != (self.view.brokers, self.view.controller_id):
            log.info("cluster: live brokers %s, controller %d", sorted(brokers), controller)
            self._publish(ClusterView(brokers, controller, self.view.partitions))
            if self.replicas is not None:
                self.replicas.write_plan(brokers)
            if self.control is not None:
                self.control.view_changed()

    def _states_changed(self, keys) -> None:
        """Partition states changed (control thread): our replicas take their roles; Metadata follows; the
        controller finishes reassignments whose ISR is now complete."""
        self.replicas.apply(keys)
        self._reassign(keys)
        partitions = {name: [[s.leader, s.leader_epoch, list(s.isr)] if s else [-1, -1, []]
                             for s in self.states.of_topic(name)] for name in self.states.topics()}
        self._publish(ClusterView(self.view.brokers, self.view.controller_id, partitions))

    def _publish(self, view: ClusterView) -> None:
        if view != self.view:
            self.view = view
            view.write(self.dir)

    def owns_group(self, group_id: str) -> bool:
        return self.view.coordinator_for(group_id) == self.broker_id

    clustered = True

    def live_brokers(self) -> int:
        return len(self.view.brokers)

    def marker_address(self, topic: str, partition: int) -> tuple[str, int] | None:
        """Where a transaction marker goes: the partition's leader, or for a group entry
        (`__consumer_offsets/<group>`) the group's coordinator; None while there is none."""
        group = topic.partition("/")[2] if topic.startswith("__consumer_offsets/") else None
        if group is not None:
            node = self.view.coordinator_for(group)
        else:
            state = self.view.partition(topic, partition)
            node = state[0] if state else -1
        b = self.view.brokers.get(node)
        return None if b is None else b.address(self.config.inter_broker_listener.name)

    # ------------------------------------------------------------ topics

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

    # ------------------------------------------------------------ SCRAM credentials

    def _users_changed(self, names) -> None:
        """/config/users changed (kazoo's thread): watch each user's node, mirror them all."""
        for name in set(names) - self._user_watches:
            self._user_watches.add(name)
            DataWatch(self.zk, paths.user_config(name), lambda *_: self._soon(self._mirror_users))
        self._soon(self._mirror_users)

    def _mirror_users(self) -> None:
        """Copy every user's credentials from ZooKeeper to credentials.json, which processors read."""
        users = {}
        for name in self.zk.get_children(paths.USER_CONFIGS):
            try:
                config = paths.load(self.zk.get(paths.user_config(name))[0]).get("config", {})
            except NoNodeError:
                continue
            config = {k: v for k, v in config.items() if k in scram.MECHANISMS}  # the node holds quotas too
            if config:
                users[name] = config
        credentials.save(credentials.path_in(self.dir), users)

    def alter_scram_credentials(self, deletions, upsertions) -> dict:
        """Write each user's /config/users/<name> (the version read, so a concurrent change through
        another broker is retried, not lost), then mirror here; others mirror through their watches."""
        results = {}
        for name in dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions]):
            mine_d = [d for d in deletions if d[0] == name]
            mine_u = [u for u in upsertions if u[0] == name]

            def change(config: dict, name=name, mine_d=mine_d, mine_u=mine_u) -> dict:
                users = {name: config}  # its quotas too: apply changes only the mechanisms
                results.update(users_module.apply(users, mine_d, mine_u))  # a retry's results replace these
                return users.get(name, {})

            update_config(self.zk, paths.user_config(name), change, create_empty=False)
        self._mirror_users()
        return results

    def create_acls(self, bindings) -> list[tuple[int, str | None]]:
        """Kafka's ACL nodes, versioned writes and change notifications (zookeeper/acls.py), mirrored here."""
        return self.acls.create(bindings)

    def delete_acls(self, filters) -> list[list]:
        return self.acls.delete(filters)

    def alter_topic_config(self, manager: LogManager, name: str, overrides: dict[str, str]) -> None:
        """Write /config/topics/<name> (Kafka's node), then apply here; the other brokers apply it through
        their watch on that node."""
        path = paths.topic_config(name)
        data = paths.dump({"version": 1, "config": overrides})
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        manager.alter_topic_config(name, overrides)
        if self.replicas is not None:
            self.replicas.write_plan()  # follower.replication.throttled.replicas may have changed

    def alter_broker_config(self, manager: LogManager, level: str, values: dict[str, str]) -> None:
        """Write /config/brokers/<level> and a change notification, then apply here; the other brokers
        apply it through their watch on /config/changes (`dynamic_configs.py`)."""
        self.dynamic.write_broker(level, values)
        manager.set_broker_level(level, values)

    def set_client_quotas(self, manager: LogManager, quotas: dict[str, dict]) -> None:
        """Write the changed /config/clients and /config/users nodes, then apply here."""
        self.dynamic.write_quotas(manager.dynamic.get("quotas", {}), quotas)
        manager.set_dynamic("quotas", quotas)

    def _load_dynamic(self) -> None:
        """A config change notification (or start-up): take the broker levels and quotas ZooKeeper holds."""
        try:
            brokers, quotas = self.dynamic.read()
            if quotas != self.manager.dynamic.get("quotas", {}):
                self.manager.set_dynamic("quotas", quotas)
                log.info("client quotas now %s", quotas)
            if brokers != self.manager.dynamic.get("brokers", {}):
                self.manager.set_dynamic("brokers", brokers)
                log.info("dynamic broker configs now %s", brokers)
            if self.control is not None:
                self.control.apply_dynamic()
        except (ConfigError, ValueError) as exc:  # written by another tool without our checks: keep what we had
            log.error("cannot apply the dynamic configs in ZooKeeper: %s", exc)

    def _dynamic_applied(self, values: dict[str, str]) -> None:
        """The controller's unclean election default and the replica fetcher's throttle follow the dynamic
        broker configs (else server.properties')."""
        setting = BROKER_SETTINGS["unclean.leader.election.enable"]
        self.controller.unclean_default = setting.parse(values.get(setting.name, self.config[setting.name]))
        setting = BROKER_SETTINGS["follower.replication.throttled.rate"]
        rate = setting.parse(values.get(setting.name, self.config[setting.name]))
        rate = rate if rate < 2**63 - 1 else None
        if self.replicas is not None and rate != self.replicas.throttle_rate:
            self.replicas.throttle_rate = rate
            self.replicas.write_plan()
            log.info("follower.replication.throttled.rate: %s", "unlimited" if rate is None else f"{rate} B/s")

    def _config_changed(self, name: str, topic_id: str, data: bytes) -> None:
        """A topic's config node changed (control thread): apply it if it is not what we hold."""
        info = self.manager.topics().get(name)
        if info is None or info.topic_id != topic_id:
            return
        config = {k: str(v) for k, v in paths.load(data).get("config", {}).items()}
        if config != info.config:
            try:
                self.manager.alter_topic_config(name, config)
                log.info("topic %s: config overrides now %s", name, config)
                if self.replicas is not None:
                    self.replicas.write_plan()  # follower.replication.throttled.replicas may have changed
            except KafkaError as exc:
                log.error("cannot apply the config of topic %s from ZooKeeper: %s", name, exc)

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

    # ------------------------------------------------------------ producer ids

    def next_producer_id(self) -> int:
        if self._next_id >= self._block_end:
            self._next_id, self._block_end = self._claim_producer_block()
        pid = self._next_id
        self._next_id += 1
        return pid

    def _claim_producer_block(self) -> tuple[int, int]:
        """[start, end) of a fresh block, claimed with compare-and-set on the latest block's node."""
        while True:
            try:
                data, stat = self.zk.get(paths.PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = paths.dump({"version": 1, "broker": self.broker_id, "block_start": 0,
                                    "block_end": PRODUCER_ID_BLOCK - 1})
                try:
                    self.zk.create(paths.PRODUCER_ID_BLOCK, block)
                    return 0, PRODUCER_ID_BLOCK
                except NodeExistsError:
                    continue
            start = paths.load(data)["block_end"] + 1
            block = paths.dump({"version": 1, "broker": self.broker_id, "block_start": start,
                                "block_end": start + PRODUCER_ID_BLOCK - 1})
            try:
                self.zk.set(paths.PRODUCER_ID_BLOCK, block, version=stat.version)
                return start, start + PRODUCER_ID_BLOCK
            except BadVersionError:
                continue

    # ------------------------------------------------------------ shutdown

    def controlled_shutdown(self) -> None:
        """Hand our leaderships to live ISR members and leave every ISR (control thread)."""
        live = set(self._live_ids()) - {self.broker_id}
        moved = self.replicas.leave(live)
        log.info("controlled shutdown: %d partition states handed over", moved)

    def close(self) -> None:
        """End the session: our registration and controllership go at once."""
        try:
            self.zk.stop()
        finally:
            self.zk.close()
