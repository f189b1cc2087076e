"""The partition lock: exclusive across processes and threads, released when its holder dies, and never
left locked by a run that is gone."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

from mmlog.log import lock as locks
from mmlog.log.lock import PartitionLock
from mmlog.log.state import LOCK_EPOCH, STATE_FILE, PartitionState

CTX = multiprocessing.get_context("fork")


def _lock(directory) -> PartitionLock:
    directory.mkdir(exist_ok=True)
    return PartitionLock(directory, PartitionState(directory))


def _hold(directory, ready, release):
    lock = _lock(directory)
    lock.acquire()
    ready.set()
    release.wait(30)
    lock.release()


def _held_by_child(directory):
    ready, release = CTX.Event(), CTX.Event()
    child = CTX.Process(target=_hold, args=(directory, ready, release))
    child.start()
    assert ready.wait(10)
    return child, release


def test_a_second_process_cannot_take_a_held_lock(tmp_path):
    child, release = _held_by_child(tmp_path / "p")
    try:
        lock = _lock(tmp_path / "p")
        assert not lock.acquire(blocking=False)
        release.set()
        child.join(10)
        assert lock.acquire(blocking=False)
        lock.release()
        lock.close()
    finally:
        release.set()
        child.join(10)


def test_a_lock_holder_killed_by_sigkill_releases_the_lock(tmp_path):
    child, _ = _held_by_child(tmp_path / "p")
    lock = _lock(tmp_path / "p")
    assert not lock.acquire(blocking=False)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert not child.is_alive()
    assert lock.acquire(blocking=False)  # the kernel marked the dead holder's mutex: it is ours
    lock.release()
    assert lock.acquire(blocking=False)  # and consistent again: it goes on working
    lock.release()
    lock.close()


def test_two_threads_sharing_one_lock_object_exclude_each_other(tmp_path):
    lock = _lock(tmp_path / "p")
    inside = []
    overlaps = []

    def work():
        for _ in range(300):
            with lock:
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps
    lock.close()


def test_two_lock_objects_in_one_process_exclude_each_other(tmp_path):
    a, b = _lock(tmp_path / "p"), _lock(tmp_path / "p")
    with a:
        assert not b.acquire(blocking=False)
    assert b.acquire(blocking=False)
    b.release()
    a.close()
    b.close()


def test_the_processes_of_one_run_share_the_lock_epoch(tmp_path):
    child, release = _held_by_child(tmp_path / "p")  # joined the log dir first: its epoch is the run's
    try:
        lock = _lock(tmp_path / "p")
        assert not lock.acquire(blocking=False)  # so this process did not initialise the held mutex again
    finally:
        release.set()
        child.join(10)
    lock.close()


def test_a_mutex_a_power_loss_left_locked_is_initialised_again_by_the_next_run(tmp_path):
    # A flush syncs the state page while its writer holds the lock; after a power loss that is the page on
    # disk, locked by a thread no exit will ever mark. Simulated: a locked page written back over the file.
    directory = tmp_path / "p"
    lock = _lock(directory)  # this process joins the dir: the run goes on after the child is gone
    child, release = _held_by_child(directory)
    locked_page = (directory / STATE_FILE).read_bytes()
    release.set()
    child.join(10)
    fd = os.open(directory / STATE_FILE, os.O_WRONLY)
    os.pwrite(fd, locked_page, 0)
    os.close(fd)
    assert not lock.acquire(blocking=False)  # the same run would wait for it forever
    lock.close()
    locks.release(tmp_path)  # the run ends: no living process holds the dir's locks file
    lock = _lock(directory)
    assert lock._slots[LOCK_EPOCH] != int.from_bytes(locked_page[LOCK_EPOCH * 8:LOCK_EPOCH * 8 + 8], "little")
    assert lock.acquire(blocking=False)
    lock.release()
    lock.close()
