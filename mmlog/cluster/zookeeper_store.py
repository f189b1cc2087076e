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
controller candidacy are then made again (the watches re-arm themselves; those
whose first read was refused are set again), and every hosted partition takes its
role again from its state.

The store is made of parts: this module holds the session, the registration, the
view of live brokers and producer ids; `zookeeper_topics.py` the topic catalogue and
topic admin, `zookeeper_configs.py` configs, quotas, users and ACLs, and
`controllership.py` running for controller and the controller's duties.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from mmlog.cluster import paths, session
from mmlog.cluster.controller import Controller
from mmlog.cluster.controllership import Controllership
from mmlog.cluster.dynamic_configs import DynamicConfigs
from mmlog.cluster.meta import ClusterError, load_meta, new_cluster_id, stored_cluster_id
from mmlog.cluster.offset_store import ZooKeeperOffsetStore
from mmlog.cluster.partition_states import PartitionStates
from mmlog.cluster.reassignment import Reassignments
from mmlog.cluster.replicas import ReplicaManager
from mmlog.cluster.zookeeper_configs import ZooKeeperConfigs
from mmlog.cluster.zookeeper_topics import ZooKeeperTopics
from mmlog.errors import MetadataStoreUnreachable
from mmlog.ipc.cluster_view import ClusterView, Endpoint
from mmlog.log.manager import LogManager
from mmlog.security.zookeeper_acls import ZooKeeperAcls

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


class BrokerIdInUse(ClusterError):
    """Another live broker is registered under our broker.id."""


class ZooKeeperStore(ZooKeeperTopics, ZooKeeperConfigs, Controllership):
    """The control plane's store in cluster mode: a `MetadataStore` (store.py), as `EmbeddedStore` is."""

    clustered = True

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
        self.replicas.on_roles = control.roles_changed  # before the first roles: those at start count too
        self._mirror_users()  # before others can see us: their inter-broker logins need the credentials here
        self.acls.start()  # and the ACLs that authorise them
        self._register()
        self._run_for_controller()
        self._refresh_view()
        self._apply_all_states()  # watches that fired before there was a control thread, and the rest
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
                                                                 self.me.listeners, self.config.protocol_map,
                                                                 self.me.registry)
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
            self._soon(self.states.watch_missing)  # state watches whose first read was refused meanwhile
            self._soon(self._membership_changed)  # what watch work the outage made fail, done now

    def _rejoin(self) -> None:
        """A new session: read again what watches report, then register as at start-up.

        Work a watch queued while the session was going (a paused broker wakes to a dead session)
        failed on it and is gone, and kazoo re-runs a children watch only if the children differ from
        what it last saw: a topic whose creation was seen but not synced would stay unknown here. Then
        every hosted partition takes its role again from its state (a data watch re-runs only if its
        node changed).
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
            # As Kafka's controller sends a re-registered broker the state of every partition it hosts:
            # apply them all again (sync_topics set any state watch that was missing), not only those
            # whose node changed, since work done with them while the session was going may be lost.
            self._apply_all_states()
        except MetadataStoreUnreachable as exc:
            log.warning("registering again postponed: %s", exc)
            self._session_lost = not self.zk.connected  # then the next CONNECTED rejoins
            if not self._session_lost:
                retry = threading.Timer(1.0, lambda: self._soon(self._rejoin))
                retry.daemon = True
                retry.start()

    def _apply_all_states(self) -> None:
        """Every tracked partition takes its role from the state last read, changed or not."""
        self.states.drain()
        self._states_changed({(t, p) for t in self.states.topics() for p in range(len(self.states.of_topic(t)))})

    # ------------------------------------------------------------ membership and the view

    def _live_ids(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(paths.BROKER_IDS))

    def _registrations(self, live) -> dict[int, int]:
        """{broker id: the czxid of its registration} (Kafka's broker epoch): a broker registered after a
        partition state was written has restarted or lost its session since (election.decide)."""
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
                                     paths.registration_listeners(doc), doc.get("schema_registry_urls", ()),
                                     int(doc.get("timestamp") or 0))
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

    def _read_json(self, path: str, field: str, missing):
        """One field of a JSON node, or `missing` when there is no node."""
        try:
            return paths.load(self.zk.get(path)[0])[field]
        except NoNodeError:
            return missing

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
