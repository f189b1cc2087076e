"""A processor's allowance and a connection's budget: small frames take no lock, one connection cannot take
the pool, and every byte goes back."""

from mmlog.ipc.memory_pool import MemoryPool
from mmlog.processors.memory import CHUNK, Allowance, ConnectionBudget, connection_limit

MiB = 1 << 20


class CountingPool(MemoryPool):
    """A real pool that counts its locked calls."""

    def __init__(self, *args):
        super().__init__(*args)
        self.locked_calls = 0

    def _lock(self):
        self.locked_calls += 1
        super()._lock()


def test_small_frames_are_served_from_local_credit_without_the_lock():
    pool = CountingPool(512 * MiB, 100 * MiB, 2)
    budget = ConnectionBudget(Allowance(pool, 0), 100 * MiB)
    for _ in range(100_000):  # a producer's 1 KiB requests, each reserved, handled and released
        assert budget.reserve(1024, 1024) == 1024
        budget.release(1024)
    assert pool.locked_calls == 1  # one chunk of credit, taken once
    assert pool.used == CHUNK + 1024 and budget.held == 0


def test_credit_beyond_two_chunks_goes_back_to_the_pool():
    pool = MemoryPool(512 * MiB, 100 * MiB, 1)
    allowance = Allowance(pool, 0)
    budgets = [ConnectionBudget(allowance, 100 * MiB) for _ in range(5000)]
    for b in budgets:
        b.reserve(60_000, 60_000)  # 5000 connections with a 60 KB frame each: about 286 MiB
    assert pool.used >= 5000 * 60_000
    for b in budgets:
        b.release(60_000)
    assert pool.used <= 2 * CHUNK and allowance.credit <= 2 * CHUNK


def test_big_frames_reserve_from_the_pool_and_give_back_in_one_piece():
    pool = MemoryPool(512 * MiB, 100 * MiB, 1)
    budget = ConnectionBudget(Allowance(pool, 0), 100 * MiB)
    assert budget.reserve(128 * 1024, 10 * MiB) == 128 * 1024  # growth: the grow rule grants `want`
    assert budget.reserve(128 * 1024, 10 * MiB - 128 * 1024) == 128 * 1024
    budget.release(256 * 1024)
    assert pool.used == 0 and budget.held == 0


def test_one_connection_holds_at_most_its_limit():
    pool = MemoryPool(512 * MiB, 100 * MiB, 1)
    limit = connection_limit(100 * MiB, 512 * MiB)
    assert limit == 100 * MiB
    budget = ConnectionBudget(Allowance(pool, 0), limit)
    assert budget.reserve(60 * MiB, 100 * MiB) == 60 * MiB
    assert budget.reserve(50 * MiB, 50 * MiB) == 0  # would pass its limit, however free the pool is
    assert not pool.waiting(0)  # the pool was not asked: this connection waits for its own requests
    assert budget.reserve(40 * MiB, 40 * MiB) == 40 * MiB
    other = ConnectionBudget(Allowance(pool, 0), limit)
    assert other.reserve(MiB, MiB) == MiB  # another connection still gets memory


def test_a_small_pool_lets_connections_pipeline_more_than_one_frame():
    assert connection_limit(1 * MiB, 512 * MiB) == 64 * MiB


def test_small_frames_are_funded_one_by_one_past_the_floor_and_go_back_first():
    pool = MemoryPool(10 * MiB, 8 * MiB, 1)
    allowance = Allowance(pool, 0)
    big = ConnectionBudget(allowance, 10 * MiB)
    assert big.reserve(2 * MiB, 8 * MiB) == 2 * MiB  # growth up to limit - floor
    small = ConnectionBudget(allowance, 10 * MiB)
    assert small.reserve(1000, 1000) == 1000  # no chunk of credit fits under the floor: funded exactly
    assert allowance.credit == 0 and allowance.pressure == 1000
    small.release(1000)
    assert pool.used == 2 * MiB and allowance.pressure == 0  # straight back to the pool, not kept as credit
