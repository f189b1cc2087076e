"""What the power-loss tests of a cluster share: a machine (a power-loss file system) per broker."""

import contextlib

import pytest

from mmlog.testing.lazyfs import broker_machine


@pytest.fixture
def machines(tmp_path):
    """Three power-loss file systems, one per broker, each holding that broker's data dir; unmounted at the end."""
    with contextlib.ExitStack() as stack:
        mounts = []
        for i in range(3):
            mounts.append(broker_machine(tmp_path / f"machine-{i}", i))
            stack.callback(mounts[-1].stop)
        yield mounts
