"""The partition lock: exclusive across processes and threads, and released by the kernel when its holder dies."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

from mmlog.log.lock import PartitionLock

CTX = multiprocessing.get_context("fork")


def _hold(directory, ready, release):
    lock = PartitionLock(directory)
    lock.acquire()
    ready.set()
    release.wait(30)
    lock.release()


def test_a_second_process_cannot_take_a_held_lock(tmp_path):
    ready, release = CTX.Event(), CTX.Event()
    child = CTX.Process(target=_hold, args=(tmp_path, ready, release))
    child.start()
    try:
        assert ready.wait(10)
        lock = PartitionLock(tmp_path)
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
    ready, release = CTX.Event(), CTX.Event()
    child = CTX.Process(target=_hold, args=(tmp_path, ready, release))
    child.start()
    assert ready.wait(10)
    lock = PartitionLock(tmp_path)
    assert not lock.acquire(blocking=False)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert not child.is_alive()
    assert lock.acquire(blocking=False)  # the kernel let go of the dead holder's lock
    lock.release()
    lock.close()


def test_two_threads_sharing_one_lock_object_exclude_each_other(tmp_path):
    lock = PartitionLock(tmp_path)
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
    a, b = PartitionLock(tmp_path), PartitionLock(tmp_path)
    with a:
        assert not b.acquire(blocking=False)
    assert b.acquire(blocking=False)
    b.release()
    a.close()
    b.close()
