"""Many partitions are a non-event: the descriptor limit raised to the hard one in every process, thousands of
partitions served with none closed to stay within a budget, a start and a stop that do not open every idle
partition, and recovery after SIGKILL of partitions written since the last clean stop."""

from __future__ import annotations

import functools
import os
import re
import resource
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from mmlog.testing import EmbeddedBroker, connections
from tests.acceptor.test_limits import create, fetch_from_each, produce_to_each

NONE = 0
connect = functools.partial(connections.connect, timeout=120)


def nofile(pid: int) -> tuple[int, int]:
    """(soft, hard) "Max open files" of a process, from /proc/<pid>/limits."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no Max open files line for {pid}")


class SoftLimitedBroker(EmbeddedBroker):
    """A broker started with a soft RLIMIT_NOFILE below its hard one, as a login shell's `ulimit -Sn` leaves it."""

    def __init__(self, *args, soft: int, **kw) -> None:
        super().__init__(*args, **kw)
        self.soft = soft

    def command(self) -> list[str]:
        wrapper = ("import os, resource, sys; hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; "
                   "resource.setrlimit(resource.RLIMIT_NOFILE, (%d, hard)); os.execv(sys.argv[1], sys.argv[1:])"
                   % self.soft)
        return [sys.executable, "-c", wrapper, *super().command()]


def test_every_process_of_the_broker_runs_with_its_soft_descriptor_limit_raised_to_the_hard_one(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip("the hard limit leaves nothing to raise")
    with SoftLimitedBroker(tmp_path / "data", processors=2, soft=1024) as broker:
        pids = [broker.pid, *broker.processor_pids(), broker.cleaner_pid()]
        assert len(pids) == 4
        for pid in pids:
            soft_now, hard_now = nofile(pid)
            assert soft_now == hard_now == (hard if hard != resource.RLIM_INFINITY else hard_now), pid
        assert any(re.search(r"descriptors: limit \d+ per process \(soft limit was 1024", line)
                   for line in broker.log_lines)


@pytest.fixture
def fast_dir():
    """A data dir on tmpfs when there is one (thousands of partitions' fsyncs at the stop), else a temporary one."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="mmlog-many-", dir=shm if shm.is_dir() else None) as d:
        yield Path(d)


N = 3000


def test_a_broker_serves_thousands_of_partitions_from_every_processor_without_closing_any(fast_dir):
    from mmlog.testing.scrape import scrape

    with EmbeddedBroker(fast_dir / "data", processors=2, config={"metrics.listen": "127.0.0.1:0"}) as broker:
        with connect(broker) as first, connect(broker) as second:  # handed to one processor each, in turn
            assert create(first, ("wide", N))["wide"][0] == NONE
            for conn, tag in ((first, b"a"), (second, b"b")):
                assert produce_to_each(conn, "wide", N, lambda p: tag + b"%d" % p) == [
                    (p, NONE, 0 if tag == b"a" else 1) for p in range(N)]
            got = fetch_from_each(second, "wide", N, 0)
            assert got == {p: (NONE, [b"a%d" % p, b"b%d" % p]) for p in range(N)}
        assert scrape(broker).get("mmlog_log_partition_evictions_total") == 0
        for pid in broker.processor_pids():  # each holds every partition open: one descriptor each
            assert N <= len(os.listdir(f"/proc/{pid}/fd")) < N + 200


def _loaded(broker) -> tuple[int, int]:
    """(partitions, recovered) of the broker's last start, from its log."""
    lines = [m for line in broker.log_lines if (m := re.search(r"loaded partitions=(\d+) recovered=(\d+)", line))]
    return int(lines[-1][1]), int(lines[-1][2])


def test_a_many_partition_broker_stops_and_starts_without_opening_idle_partitions_and_recovers_after_sigkill(
        fast_dir):
    n = 2000
    broker = EmbeddedBroker(fast_dir / "data", processors=2)
    broker.start()
    try:
        with connect(broker) as conn:
            assert create(conn, ("many", n))["many"][0] == NONE
            assert all(code == NONE for _, code, _ in produce_to_each(conn, "many", n, lambda p: b"one"))
        assert broker.stop(timeout=120) == 0
        broker.start()  # after a clean stop: nothing to recover, no partition opened by the start
        assert _loaded(broker) == (n, 0)
        with connect(broker) as conn:
            assert all(code == NONE for _, code, _ in produce_to_each(conn, "many", 10, lambda p: b"two"))
        os.killpg(broker.proc.pid, signal.SIGKILL)  # the broker and every child at once
        broker.proc.wait(30)
        broker.start()
        # the ten written since the clean stop are recovered; the others, untouched since, are trusted
        assert _loaded(broker) == (n, 10)
        with connect(broker) as conn:
            got = fetch_from_each(conn, "many", n, 0)
            assert got == {p: (NONE, [b"one", b"two"] if p < 10 else [b"one"]) for p in range(n)}
    finally:
        broker.stop(timeout=120)
