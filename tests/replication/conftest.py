"""Three-broker clusters on a real ZooKeeper, with short replication timeouts set here."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import three_brokers  # noqa: F401  (for the tests here)
from tests.metrics.scrape import METRICS_ON

# Short enough that failover tests take seconds, long enough for a loaded 2-core machine.
REPLICATION = {
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 100,
    "replica.high.watermark.checkpoint.interval.ms": 500,
    "leader.imbalance.check.interval.seconds": 1,
}


@pytest.fixture
def replicated(tmp_path, zk_connect):  # noqa: F811
    """Three brokers (ids 0, 1, 2) with replication timeouts for tests."""
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **METRICS_ON) as brokers:
        yield brokers
