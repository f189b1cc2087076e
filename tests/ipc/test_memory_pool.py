"""The request memory pool: its two rules, its wake-ups, and its lock across real processes."""

import os
import select
import signal
import threading

import pytest

from mmlog.ipc.memory_pool import MemoryPool

MiB = 1 << 20


def readable(fd, timeout=0.0):
    return bool(select.select([fd], [], [], timeout)[0])


def test_growth_stops_at_the_floor_and_only_funded_frames_pass_it():
    pool = MemoryPool(limit=100, floor=40, slots=2)
    assert pool.reserve(0, 60, 0) == 60  # grows up to limit - floor
    assert pool.reserve(0, 1, 0) == 0  # one more byte of growth would eat into the floor
    assert pool.reserve(1, 1, 40) == 40  # a frame that takes all it needs may use the floor
    assert pool.reserve(1, 0, 1) == 0  # nothing fits past the limit
    assert (pool.used, pool.used_by(0), pool.used_by(1)) == (100, 60, 40)
    pool.release(1, 40)
    pool.release(0, 60)
    assert pool.used == 0


def test_a_failed_reservation_is_woken_by_the_next_release_and_only_then():
    pool = MemoryPool(limit=10, floor=0, slots=3)
    assert pool.reserve(0, 10, 10) == 10
    assert pool.reserve(1, 5, 5) == 0 and pool.waiting(1)
    assert not readable(pool.fds[1])
    pool.release(0, 1)  # not enough for slot 1, but it must look again: wake it
    assert readable(pool.fds[1]) and not pool.waiting(1)
    assert not readable(pool.fds[2]) and not readable(pool.fds[0])  # those were not waiting
    pool.drain(1)
    assert not readable(pool.fds[1])
    pool.release(0, 9)
    assert not readable(pool.fds[1])  # no one waits: no wake-up


def test_reclaim_gives_back_a_dead_slots_share_and_wakes_waiters():
    pool = MemoryPool(limit=10 * MiB, floor=MiB, slots=2)
    assert pool.reserve(0, 9 * MiB, 0)
    assert pool.reserve(1, 0, 2 * MiB) == 0
    assert pool.reclaim(0) == 9 * MiB
    assert pool.used == 0 and readable(pool.fds[1])


def fork(fn):
    """Run fn in a forked child; the child exits 0 if fn returns, 1 if it raises."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    return pid


def test_processes_reserving_at_once_never_pass_the_limit():
    pool = MemoryPool(limit=1000, floor=100, slots=3)

    def hammer(slot):
        def run():
            for i in range(20_000):
                got = pool.reserve(slot, 37, 100 + i % 50)
                assert pool.used <= pool.limit
                if got:
                    pool.release(slot, got)
        return run

    pids = [fork(hammer(slot)) for slot in range(3)]
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes == [0, 0, 0]
    assert pool.used == 0 and all(pool.used_by(s) == 0 for s in range(3))


def test_a_process_killed_inside_the_lock_does_not_wedge_the_pool():
    pool = MemoryPool(limit=MiB, floor=0, slots=2)

    def die_holding_the_lock():
        pool.reserve(1, 1000, 0)
        pool._lock()
        os.kill(os.getpid(), signal.SIGKILL)

    pid = fork(die_holding_the_lock)
    os.waitpid(pid, 0)
    done = threading.Event()
    threading.Thread(target=lambda: (pool.reserve(0, 10, 0), done.set()), daemon=True).start()
    assert done.wait(5), "the lock died with its holder"
    assert pool.reclaim(1) == 1000 and pool.used == 10


def test_the_floor_cannot_exceed_the_limit():
    with pytest.raises(ValueError):
        MemoryPool(limit=10, floor=11, slots=1)
