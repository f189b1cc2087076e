"""`--exit-with-parent`: a broker started by a test or a script stops when its starter is gone.

A thread watches the parent from the first moment (start-up included, before the supervisor's
loop runs): it sleeps on a pidfd of the parent, which the kernel makes readable when the parent
exits (Linux 5.3; older kernels: the parent pid polled twice a second). When the parent goes, it
sends the broker SIGTERM, which starts the ordinary clean
shutdown. If that shutdown has not finished after `grace_s` (it can hang when the starter took
ZooKeeper down with it: a kazoo call waits for a connection that never comes back), the thread
SIGKILLs the broker's children and ends the process: an unclean stop, which recovery is built for,
is better than a broker that outlives its test by hours holding ports and files.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from pathlib import Path

from mmlog.system.process import name_thread

log = logging.getLogger("mmlog.broker")

POLL_S = 0.5
THREAD_NAME = "mmlog-parent"  # the watch thread, as top -H shows it
GRACE_S = 30.0


def watch_parent(grace_s: float = GRACE_S) -> threading.Thread:
    """Start the watch (a daemon thread) for the process that started this one."""
    parent = os.getppid()
    thread = threading.Thread(target=_watch, args=(parent, grace_s), name="parent-watch", daemon=True)
    thread.start()
    return thread


def _watch(parent: int, grace_s: float) -> None:
    name_thread(THREAD_NAME)
    _wait_for_exit(parent)
    log.info("the process that started the broker is gone: shutting down")
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    log.error("shutdown still running %.0f s after the parent went: killing the broker's processes", grace_s)
    end_now()


def _wait_for_exit(parent: int) -> None:
    """Return once `parent` is no longer this process's parent."""
    try:
        pidfd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfd here: poll
        pidfd = None
    if pidfd is not None:
        try:
            if os.getppid() == parent:  # else the pid may be another process's already
                waiting = select.poll()  # not select(): no FD_SETSIZE limit on the descriptor's number
                waiting.register(pidfd, select.POLLIN)
                waiting.poll()
        finally:
            os.close(pidfd)
    while os.getppid() == parent:  # the poll without a pidfd; at once otherwise (children move on exit)
        time.sleep(POLL_S)


def end_now() -> None:
    """SIGKILL this process's children and end it with exit code 1, whatever its threads are doing."""
    for pid in children():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    logging.shutdown()
    os._exit(1)


def children() -> list[int]:
    """Pids of this process's children (forked by any of its threads)."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass  # the thread ended meanwhile
    return pids
