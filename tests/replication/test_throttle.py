"""The follower's replication throttle, alone: a token bucket of one second's worth."""

from __future__ import annotations

import time

from mmlog.replication.throttle import UNLIMITED, Throttle


def test_an_unlimited_or_empty_throttle_is_inactive():
    throttle = Throttle()
    assert not throttle.active and throttle.rate == UNLIMITED
    throttle.update(1000, [])
    assert not throttle.active
    throttle.update(1000, [("t", 0)])
    assert throttle.active and throttle.partitions == {("t", 0)}


def test_bytes_past_the_rate_hold_throttled_fetches_until_the_bucket_refills():
    throttle = Throttle()
    throttle.update(100_000, [("t", 0)])
    assert not throttle.exceeded()
    throttle.record(20_000)  # 0.2 s worth beyond an empty bucket
    assert throttle.exceeded()
    time.sleep(0.3)
    assert not throttle.exceeded()


def test_one_fetch_asks_for_a_quarter_second_at_most():
    throttle = Throttle()
    throttle.update(400_000, [("t", 0)])
    assert throttle.max_bytes(1 << 20) == 100_000
    assert throttle.max_bytes(50_000) == 50_000
