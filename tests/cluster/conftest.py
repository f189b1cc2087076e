"""Three-broker clusters on the run's ZooKeeper (its fixtures, `zookeeper`, `zk_connect` and `zk`, are in
tests/conftest.py: one server for the whole run, whichever directory a test lives in)."""

from __future__ import annotations

import concurrent.futures
import contextlib

import pytest

from mmlog.client.cluster import Cluster
from mmlog.testing import EmbeddedBroker
from tests.wait import wait_for

SESSION_MS = 3000  # how long a SIGKILLed broker stays in the registry


def cluster_broker(tmp_path, zk_connect: str, broker_id: int, user: str | None = None, **config) -> EmbeddedBroker:
    return EmbeddedBroker(tmp_path / f"broker-{broker_id}", processors=1, user=user, config={
        "zookeeper.connect": zk_connect, "broker.id": broker_id, "zookeeper.session.timeout.ms": SESSION_MS,
        "group.initial.rebalance.delay.ms": 0, **config})


@contextlib.contextmanager
def three_brokers(tmp_path, zk_connect: str, users=None, homes=None, **config):
    """Brokers 0, 1 and 2 on one ZooKeeper chroot, registered; every one is stopped at the end.
    `users`: broker id -> the system user it runs as (partition tests); `homes`: broker id -> the directory
    its data dir is made in instead of `tmp_path` (a file system of its own: power-loss soaks).

    Broker 0 starts first and is the controller (it is ready only once it has stood for election), as tests
    have always had it; 1 and 2 then start side by side, their boots (imports, kernels, logs) overlapping."""
    brokers = [cluster_broker((homes or {}).get(i, tmp_path), zk_connect, i, (users or {}).get(i), **config)
               for i in range(3)]
    try:
        brokers[0].start()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(b.start) for b in brokers[1:]]:
                started.result()
        wait_for(lambda: len(live_brokers(brokers[0].bootstrap)) == 3, what="three registered brokers")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


@pytest.fixture
def cluster(tmp_path, zk_connect):
    """Three brokers (ids 0, 1, 2) on one ZooKeeper chroot."""
    with three_brokers(tmp_path, zk_connect) as brokers:
        yield brokers


def live_brokers(bootstrap: str) -> dict[int, object]:
    """node id -> broker, as Metadata from this bootstrap says."""
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([])
    return meta.brokers


def leaders(bootstrap: str, topic: str) -> tuple[int, ...]:
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([topic], allow_auto_create=False)
    return meta.topics[topic].leaders

