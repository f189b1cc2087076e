"""Connecting to ZooKeeper: `host:port[,host:port...][/chroot]`, the chroot created if missing."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from mmlog.acceptor.metadata_store import ClusterError
from mmlog.acceptor.zookeeper import paths

log = logging.getLogger(__name__)


class ZooKeeperUnavailable(ClusterError):
    """ZooKeeper could not be reached at start-up."""


def split_connect(connect: str) -> tuple[str, str]:
    """('h1:p1,h2:p2', '/chroot' or '') from a zookeeper.connect string."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ClusterError(f"zookeeper.connect {connect!r}: no host:port")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def connect(connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> KazooClient:
    """A started client rooted at the chroot, with the cluster's base paths in place."""
    hosts, chroot = split_connect(connect)
    client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
    try:
        client.start(timeout=connection_timeout_ms / 1000)
    except KazooTimeoutError:
        client.close()
        raise ZooKeeperUnavailable(f"cannot reach ZooKeeper at {hosts} within {connection_timeout_ms} ms") from None
    if chroot:
        client.ensure_path(chroot)
        client.chroot = chroot
    for path in paths.BASE_PATHS:
        client.ensure_path(path)
    return client
