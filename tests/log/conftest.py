"""Fixtures for the storage engine tests: small configs that roll often, and partitions closed at teardown."""

from __future__ import annotations

import pytest

from mmlog.config.settings import LogConfig
from mmlog.log import (
    kernels,
    log_recovery,
    partition,
    replica_state,
    segment_deletion,
    transaction_state,
)
from mmlog.log.partition import Partition
from tests.log.logtools import Clock


@pytest.fixture(scope="session", autouse=True)
def warm_kernels():
    """Compile (or load) the numba kernels once, before any test or forked child needs them."""
    kernels.warm()


@pytest.fixture
def config() -> LogConfig:
    """Segments of 4 KiB with an index entry every 256 bytes: a few dozen batches roll several times."""
    return LogConfig(segment_bytes=4096, segment_index_bytes=1024, index_interval_bytes=256)


@pytest.fixture
def partition_dir(tmp_path):
    return tmp_path / "topic-0"


@pytest.fixture
def open_partition(partition_dir, config):
    """Open Partition objects on partition_dir (owner by default); whatever is still open is closed uncleanly."""
    opened: list[Partition] = []

    def _open(directory=None, cfg=None, **kw) -> Partition:
        p = Partition(directory or partition_dir, cfg or config, **kw)
        opened.append(p)
        return p

    yield _open
    for p in opened:
        try:
            p.close(clean=False)
        except Exception:
            pass


@pytest.fixture
def clock(monkeypatch):
    """The log's wall clock, pinned: two paths compared stamp the same times (rolled_at, flushed_at, snapshots)."""
    c = Clock()
    for module in (partition, log_recovery, replica_state, segment_deletion, transaction_state):
        monkeypatch.setattr(module, "now_ms", lambda: c.now)
    return c
