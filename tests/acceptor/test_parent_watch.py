"""`--exit-with-parent`: a broker whose starter dies stops cleanly, and a shutdown that hangs is cut short."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mmlog.acceptor.parent_watch import THREAD_NAME
from mmlog.testing import EmbeddedBroker
from tests.acceptor.test_main import thread_turns


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _wait_gone(pids, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _starter(code: str) -> subprocess.Popen:
    """A parent process running `code`, which prints the pids to watch on its first line."""
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def _kill_starter(starter: subprocess.Popen) -> list[int]:
    pids = [int(p) for p in starter.stdout.readline().split()]
    assert pids, "the starter printed no pids"
    starter.kill()
    starter.wait()
    return pids


def _cleanup(pids) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_broker_stops_cleanly_when_the_process_that_started_it_dies(tmp_path):
    log = tmp_path / "broker.log"
    starter = _starter(f"""
import subprocess, sys, time
broker = subprocess.Popen([sys.executable, "-m", "mmlog", "broker", "--data-dir", {str(tmp_path / "data")!r},
                           "--listen", "127.0.0.1:0", "--processors", "2", "--exit-with-parent"],
                          stderr=open({str(log)!r}, "w"), start_new_session=True)
while b"ready listening" not in open({str(log)!r}, "rb").read():
    time.sleep(0.05)
print(broker.pid, flush=True)
time.sleep(600)
""")
    pids = _kill_starter(starter)
    try:
        children = [int(c) for c in open(f"/proc/{pids[0]}/task/{pids[0]}/children").read().split()]
        assert not _wait_gone(pids + children, 30), "the broker or a processor outlived its starter"
    finally:
        _cleanup(pids)
    text = log.read_text()
    assert "the process that started the broker is gone" in text and "stopped exit=0" in text


def test_a_shutdown_that_hangs_after_the_parent_died_is_cut_short_with_the_children():
    grace_s = 0.5
    # The middle process ignores SIGTERM, as a broker whose shutdown waits on a lost ZooKeeper
    # would never finish it; it has a child of its own.
    starter = _starter(f"""
import os, subprocess, sys, time
middle = subprocess.Popen([sys.executable, "-c", '''
import os, signal, subprocess, sys, time
from mmlog.acceptor.parent_watch import watch_parent
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
watch_parent(grace_s={grace_s})
print(os.getpid(), child.pid, flush=True)
time.sleep(600)
'''], stdout=subprocess.PIPE, text=True, start_new_session=True)
print(middle.stdout.readline().strip(), flush=True)
time.sleep(600)
""")
    pids = _kill_starter(starter)
    try:
        assert not _wait_gone(pids, 10), "the hung process or its child outlived the grace period"
    finally:
        _cleanup(pids)


def test_the_watch_sleeps_until_the_parent_exits_rather_than_polling_it(tmp_path):
    """It waits on a pidfd of the parent: while the parent lives, the thread is not woken at all."""
    with EmbeddedBroker(tmp_path / "data", processors=1) as broker:
        [tid] = [t for t in os.listdir(f"/proc/{broker.pid}/task")
                 if Path(f"/proc/{broker.pid}/task/{t}/comm").read_text().strip() == THREAD_NAME]
        before = thread_turns(broker.pid, tid)
        time.sleep(2)
        assert thread_turns(broker.pid, tid) == before  # polled, it turned twice a second
