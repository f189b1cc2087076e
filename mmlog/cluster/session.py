"""Connecting to ZooKeeper: `host:port[,host:port...][/chroot]`, the chroot created if missing; and the
deadline on the calls of the threads that must not wait for it.

kazoo's blocking calls wait without limit: a request made while the connection is down (SUSPENDED)
is queued until the connection returns, and a broker cut from ZooKeeper learns that its session
expired only when it reaches ZooKeeper again, so a call can wait for the whole partition. The
control thread (HW checkpoints, flushes, rolls, producer ids, admin requests, ISR changes) and the
topic worker (whose topic lock the control thread's work queues behind) register with
`DeadlineClient.bind_thread`: on them a call is refused at once while the connection is not up, and
given up after `deadline_s` (half the session timeout) otherwise, raising `MetadataStoreUnreachable`.
A request given up may still reach ZooKeeper later. The ISR, election and producer-id writes are
compare-and-sets, so a late one either applies as if on time (its watch brings the result) or fails;
a creation (CreateTopics, answered REQUEST_TIMED_OUT) may still be made, as a Kafka request that timed
out may have been carried out, and the client's retry finds it made. Other threads, kazoo's own among
them (its watch recipes retry by their own policy), keep kazoo's semantics.
"""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from mmlog.cluster.meta import ClusterError
from mmlog.cluster import paths
from mmlog.errors import MetadataStoreUnreachable

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


class DeadlineClient(KazooClient):
    """kazoo's client, whose blocking calls on the threads bound to it do not outwait a partition."""

    def __init__(self, *args, deadline_s: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deadline_s = deadline_s
        self._bound: set[int] = set()

    def bind_thread(self) -> None:
        """Give the calling thread's calls the deadline (and refuse them while disconnected)."""
        self._bound.add(threading.get_ident())

    def _wait(self, start, *args, **kwargs):
        """`start(*args, **kwargs)` (an `*_async` method) and its result, within the deadline if bound."""
        if threading.get_ident() not in self._bound:
            return start(*args, **kwargs).get()
        if self.state != KazooState.CONNECTED:  # queued, it would wait for the connection to come back
            raise MetadataStoreUnreachable(f"ZooKeeper connection {self.state.lower()}")
        try:
            return start(*args, **kwargs).get(timeout=self.deadline_s)
        except KazooTimeoutError:
            raise MetadataStoreUnreachable(f"ZooKeeper did not answer within {self.deadline_s:g} s") from None
        except ConnectionLoss:
            raise MetadataStoreUnreachable("ZooKeeper connection lost") from None
        except SessionExpiredError:
            raise MetadataStoreUnreachable("ZooKeeper session expired") from None

    def get(self, path, watch=None):
        return self._wait(self.get_async, path, watch=watch)

    def exists(self, path, watch=None):
        return self._wait(self.exists_async, path, watch=watch)

    def get_children(self, path, watch=None, include_data=False):
        return self._wait(self.get_children_async, path, watch=watch, include_data=include_data)

    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False, makepath=False,
               include_data=False):
        return self._wait(self.create_async, path, value, acl=acl or self.default_acl, ephemeral=ephemeral,
                          sequence=sequence, makepath=makepath, include_data=include_data)

    def set(self, path, value, version=-1):
        return self._wait(self.set_async, path, value, version=version)

    def delete(self, path, version=-1, recursive=False):
        if recursive:  # kazoo walks the tree with get_children and delete: each bounded
            return super().delete(path, version=version, recursive=True)
        return self._wait(self.delete_async, path, version=version)

    def ensure_path(self, path, acl=None):
        return self._wait(self.ensure_path_async, path, acl=acl)

    def transaction(self):
        return _DeadlineTransaction(self)


class _DeadlineTransaction(TransactionRequest):
    """A multi-op transaction whose commit keeps its client's deadline."""

    def commit(self):
        return self.client._wait(self.commit_async)


def connect(connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> DeadlineClient:
    """A started client rooted at the chroot, with the cluster's base paths in place; calls of the threads
    bound to it give up after half the session timeout."""
    hosts, chroot = split_connect(connect)
    client = DeadlineClient(hosts=hosts, timeout=session_timeout_ms / 1000, deadline_s=session_timeout_ms / 2000)
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
