"""Cluster mode: running for controller (`/controller`, ephemeral, first one wins; `/controller_epoch`
bumped by each new one) and, while elected, the controller's duties: electing leaders as brokers come
and go (`controller.py`), carrying reassignments through (`reassignment.py`), answering ElectLeaders
and the reassignment APIs (others answer NOT_CONTROLLER), and the replicas brokers report offline
(`/brokers/offline_replicas`). `Controllership` is a part of `ZooKeeperStore`, which holds the state
named below."""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from mmlog.cluster import paths
from mmlog.errors import KafkaError, NotController, UnknownTopicOrPartition
from mmlog.log.manager import LogManager
from mmlog.cluster.zookeeper_state import ZooKeeperState

log = logging.getLogger(__name__)


class Controllership(ZooKeeperState):
    """This broker as the cluster's controller, when it is."""

    @property
    def _controller_epoch(self) -> int:
        return self.controller.epoch

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
