"""Suite-wide set-up: numba's caches filled once before the first broker starts, and one ZooKeeper.

On a fresh clone the kernels have no cache (mmlog/system/kernel_cache.py: a directory for each state
of the sources, `NUMBA_CACHE_DIR` once mmlog is imported), and the
first broker a test starts compiles them all: about 40 s of CPU, minutes of wall time on a busy
machine, past a broker fixture's ready timeout. Compiling them here, once, in a child process (so
this one stays small), leaves every broker a warm cache. The clients' kernels (about 50 s of CPU
more, which the first tests to produce or consume paid one by one) compile in a second child at
the same time: numba compiles on one core, and the machine has two.

mmlog's modules are byte-compiled here too: with PYTHONDONTWRITEBYTECODE set, every broker and
CLI process the suite starts would otherwise compile them again from source (0.5 s of CPU each).

The ZooKeeper fixtures live here so that the whole run shares one server: a session fixture
imported into several test modules is one server per module (a JVM each, seconds of CPU).
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import mmlog
from mmlog.cluster.session import connect
from mmlog.system import kernel_cache
from mmlog.testing import EmbeddedBroker, ZooKeeperServer

WARM = """
from mmlog.acceptor.main import compaction_kernels as ck, compiled_loop, kernels, precompile
kernels.warm(); ck.warm(); precompile(); compiled_loop.warm()
# The cleaner walks a PROT_READ mmap: read-only arrays, which numba compiles apart from the writable ones
# warm() compiles (a test's first compaction paid ~10 s). Into the cache here, not at every broker's start.
for kernel in (ck.count_batches, ck.window_end, ck.walk_segment, ck.gather, ck.rewrite):
    for sig in list(kernel.signatures):
        kernel.compile((sig[0].copy(readonly=True), *sig[1:]))
"""
WARM_CLIENTS = ("from mmlog.client import bulk, encode, partitioner;"
                "bulk.warm(); encode.warm(bulk=True); partitioner.partition_for_key(b'k', 3)")


def _warmed_marker() -> Path:
    """A file the warm-up writes once both children are done, named for this state of the sources. Kernel files
    alone do not say the cache is warm: a broker or a run killed mid-compile leaves some of them, and the tests
    would then compile the rest one by one, under their brokers' ready timeouts."""
    cache = os.environ.get("NUMBA_CACHE_DIR") or Path(mmlog.__file__).parent / "__pycache__"
    return Path(cache) / f".warmed-{kernel_cache.fingerprint(kernel_cache.PACKAGE)}"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers: they find the cache warm
def pytest_sessionstart(session) -> None:
    compileall.compile_dir(Path(mmlog.__file__).parent, quiet=1)  # a no-op when the .pyc files are current
    marker = _warmed_marker()
    if marker.exists():
        return
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, "-c", code]) for code in (WARM, WARM_CLIENTS)]
    for child in children:
        if child.wait() != 0:
            raise subprocess.CalledProcessError(child.returncode, child.args)
    marker.touch()  # what a killed run compiled is loaded, not compiled again: a warm-up over it is quick
    session.config.get_terminal_writer().line(
        f"numba kernels compiled into a cold cache in {time.monotonic() - started:.0f} s")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a run without it (`-p no:xdist -o addopts=`) too
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): two workers at most. Their tests start brokers, ZooKeeper and Spark,
    and hold short timeouts set in the test: two workers keep the 2-core machine busy without starving them."""
    return min(2, os.cpu_count() or 1)


BROKER_LOG_TAIL = int(os.environ.get("MMLOG_TEST_LOG_TAIL", 60))  # lines of each broker's log in a failure report
_FIRST_BROKER = pytest.StashKey[int]()  # how many brokers were started before this test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Note which brokers a test starts, so that its failure report can show their logs."""
    item.stash[_FIRST_BROKER] = len(EmbeddedBroker.started)
    yield
    del EmbeddedBroker.started[item.stash[_FIRST_BROKER]:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the tail of every broker's log it started: a flake in CI is read there."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        for broker in dict.fromkeys(EmbeddedBroker.started[item.stash[_FIRST_BROKER]:]):  # restarted: once
            report.sections.append((f"broker {broker.broker_id} log ({broker.data_dir.name}, pid {broker.proc.pid})",
                                    "\n".join(broker.log_lines[-BROKER_LOG_TAIL:])))


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One standalone ZooKeeper (Debian's or pyspark's jars) on a free loopback port for the whole run."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as zk:
        yield zk


@pytest.fixture
def zk_connect(zookeeper):
    """zookeeper.connect with a chroot of this test's own."""
    return f"{zookeeper.connect}/mmlog-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk(zk_connect):
    """A kazoo client rooted at the test's chroot, to look at what brokers wrote."""
    client = connect(zk_connect, 10_000, 10_000)
    yield client
    client.stop()
    client.close()
