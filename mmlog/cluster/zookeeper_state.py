"""The state a ZooKeeperStore's parts share (topics, configs, controllership, the session), declared once:
`ZooKeeperStore.__init__` sets every attribute, each part reads and changes the ones it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mmlog.cluster.controller import Controller
from mmlog.cluster.dynamic_configs import DynamicConfigs
from mmlog.cluster.partition_states import PartitionStates
from mmlog.cluster.reassignment import Reassignments
from mmlog.cluster.replicas import ReplicaManager
from mmlog.cluster.session import DeadlineClient
from mmlog.config.broker import BrokerConfig
from mmlog.ipc.cluster_view import ClusterView
from mmlog.log.manager import LogManager
from mmlog.security.zookeeper_acls import ZooKeeperAcls


class ZooKeeperState:
    """Declarations only: the attributes the parts share."""

    broker_id: int
    zk: DeadlineClient
    manager: LogManager | None
    states: PartitionStates
    replicas: ReplicaManager | None
    view: ClusterView
    control: object  # the control plane, once started
    _topic_watches: dict[str, str]  # topic -> the topic id its growth watch serves
    dir: Path
    config: BrokerConfig
    controller: Controller
    dynamic: DynamicConfigs
    acls: ZooKeeperAcls
    _user_watches: set[str]
    reassignments: Reassignments
    is_controller: bool
    _offline_keys: set[tuple[str, int]]
    cluster_id: str
    wake: Callable[[], None]
