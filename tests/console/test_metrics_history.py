"""The metrics history turns the shared block's counters into rates and per-API latency percentiles."""

from __future__ import annotations

import numpy as np

from mmlog.console.metrics_history import MetricsHistory, percentile
from mmlog.ipc import metrics_block as mb

PRODUCE = 0


def test_a_percentile_is_interpolated_within_its_bucket():
    buckets = np.zeros(mb.BUCKETS, dtype=np.int64)
    buckets[mb.bucket_of(800)] = 100  # 100 requests between 0.5 and 1 ms
    assert percentile(buckets, 0.5) == 0.75
    assert percentile(buckets, 0.99) == 0.995
    assert percentile(np.zeros(mb.BUCKETS, dtype=np.int64), 0.5) == 0.0


def test_samples_hold_the_rates_and_latencies_of_the_interval_only():
    words = np.zeros(mb.REGION_WORDS, dtype=np.int64)
    history = MetricsHistory(lambda: words, interval_s=10, window_s=30)
    assert history.sample(now=100.0) is None  # the baseline
    words[mb.SCALAR["bytes_in"]] += 10_000
    words[mb.REQUESTS + PRODUCE] += 50
    words[mb.latency_at(mb.TOTAL, PRODUCE) + mb.bucket_of(2_000)] += 50
    point = history.sample(now=110.0)
    assert point["bytes_in"] == 1000.0 and point["bytes_out"] == 0.0
    assert point["apis"]["Produce"]["rate"] == 5.0
    assert 1.0 < point["apis"]["Produce"]["p99"] <= 2.5
    for t in (120.0, 130.0, 140.0):
        history.sample(now=t)
    assert [s["time"] for s in history.series()] == [120.0, 130.0, 140.0]  # a ring of window / interval
    assert history.series()[-1]["apis"] == {}
