"""The leader's ISR rule: out after the lag limit without catching up, back in once caught up to the high
watermark while fetching and registered; the leader always stays; assignment order is kept."""

from __future__ import annotations

from types import SimpleNamespace

from mmlog.replication.isr import next_isr

LAG_MS = 1_000
NOW = 100_000


def progress(log_end: int, caught_up_ago: int = 0, fetched_ago: int = 0):
    return SimpleNamespace(log_end=log_end, last_caught_up_ms=NOW - caught_up_ago, last_fetch_ms=NOW - fetched_ago)


def rep(isr, replicas=(1, 2, 3)):
    return SimpleNamespace(isr=tuple(isr), replicas=tuple(replicas))


def test_members_that_keep_up_stay_and_the_leader_is_always_in():
    isr, why = next_isr(1, rep((1, 2, 3)), 50, [(2, progress(50)), (3, progress(50, caught_up_ago=LAG_MS))],
                        NOW, LAG_MS, {1, 2, 3})
    assert isr == (1, 2, 3) and why == []


def test_a_member_not_caught_up_for_longer_than_the_lag_leaves():
    isr, why = next_isr(1, rep((1, 2, 3)), 50, [(2, progress(50)), (3, progress(40, caught_up_ago=LAG_MS + 1))],
                        NOW, LAG_MS, {1, 2, 3})
    assert isr == (1, 2) and why == [f"broker 3 leaves the ISR (not caught up for {LAG_MS + 1} ms)"]


def test_a_follower_joins_once_its_log_end_reaches_the_high_watermark():
    behind, caught_up = progress(49), progress(50)
    assert next_isr(1, rep((1, 2)), 50, [(2, progress(50)), (3, behind)], NOW, LAG_MS, {1, 2, 3})[0] == (1, 2)
    isr, why = next_isr(1, rep((1, 2)), 50, [(2, progress(50)), (3, caught_up)], NOW, LAG_MS, {1, 2, 3})
    assert isr == (1, 2, 3) and why == ["broker 3 joins the ISR at offset 50"]


def test_a_caught_up_follower_without_a_registration_or_recent_fetch_stays_out():
    assert next_isr(1, rep((1,)), 50, [(2, progress(50))], NOW, LAG_MS, {1})[0] == (1,)
    assert next_isr(1, rep((1,)), 50, [(2, progress(50, fetched_ago=LAG_MS + 1))], NOW, LAG_MS, {1, 2})[0] == (1,)


def test_the_isr_keeps_assignment_order():
    isr, _ = next_isr(3, rep((3,), replicas=(2, 3, 1)), 10, [(1, progress(10)), (2, progress(10))], NOW, LAG_MS,
                      {1, 2, 3})
    assert isr == (2, 3, 1)
