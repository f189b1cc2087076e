"""Three-broker clusters on the run's ZooKeeper (its fixtures, `zookeeper`, `zk_connect` and `zk`, are in
tests/conftest.py: one server for the whole run, whichever directory a test lives in; the cluster helpers
are mmlog/testing/cluster.py)."""

from __future__ import annotations

import pytest

from mmlog.testing.cluster import three_brokers


@pytest.fixture
def cluster(tmp_path, zk_connect):
    """Three brokers (ids 0, 1, 2) on one ZooKeeper chroot."""
    with three_brokers(tmp_path, zk_connect) as brokers:
        yield brokers
