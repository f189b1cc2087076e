"""Three-broker clusters on a real ZooKeeper, with the short replication timeouts of mmlog/testing/cluster.py."""

from __future__ import annotations

import pytest

from mmlog.testing.cluster import REPLICATION, three_brokers
from mmlog.testing.scrape import METRICS_ON


@pytest.fixture
def replicated(tmp_path, zk_connect):
    """Three brokers (ids 0, 1, 2) with replication timeouts for tests."""
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **METRICS_ON) as brokers:
        yield brokers
