"""The metrics block: each process writes its own region, a scrape sums them, and a dead process's counts are
folded into the base region so that no counter ever goes back."""

import os

import numpy as np
import pytest

from mmlog.ipc import metrics_block as mb
from mmlog.ipc.metrics_block import NULL_REGION, MetricsBlock, NullRegion, Region


def test_a_scrape_sums_every_region():
    block = MetricsBlock(processors=2)
    block.processor(0).produced(100, 3)
    block.processor(1).produced(50, 2)
    block.region(mb.MAIN).add("processor_restarts", 1)
    totals = block.totals()
    assert totals[mb.SCALAR["bytes_in"]] == 150
    assert totals[mb.SCALAR["messages_in"]] == 5
    assert totals[mb.SCALAR["processor_restarts"]] == 1


def test_a_forked_processor_writes_where_the_main_process_reads():
    block = MetricsBlock(processors=1)
    pid = os.fork()
    if pid == 0:
        block.processor(0).request(0, 3, 1.0, 1.0, 1.002, 1.002, 1.002)
        os._exit(0)
    os.waitpid(pid, 0)
    totals = block.totals()
    assert totals[mb.REQUESTS + 0] == 3
    buckets, total_us = mb.latency(totals, mb.LOCAL, 0)
    assert buckets[mb.bucket_of(2_000)] == buckets.sum() == 3  # 2 ms, three times
    assert total_us == 3 * 2_000


def test_folding_a_dead_region_keeps_its_counts_and_drops_its_gauges():
    block = MetricsBlock(processors=2)
    dead, survivor = block.processor(0), block.processor(1)
    dead.produced(10, 1)
    dead.error(0, 3)
    dead.set("connections", 4)
    survivor.produced(7, 1)
    survivor.set("connections", 2)
    before = block.totals()
    block.fold_processor(0)
    after = block.totals()
    assert after[mb.SCALAR["bytes_in"]] == before[mb.SCALAR["bytes_in"]] == 17
    assert after[mb.ERRORS + 3 + 1] == 1
    assert block.per_processor(mb.GAUGE["connections"]) == [0, 2]
    assert after[mb.GAUGE["connections"]] == 2
    block.processor(0).produced(1, 1)  # its replacement counts from zero, on top of the base
    assert block.totals()[mb.SCALAR["bytes_in"]] == 18


def test_a_duration_falls_in_the_first_bucket_it_does_not_exceed():
    assert mb.bucket_of(0) == 0
    assert mb.bucket_of(mb.BOUNDS_US[0]) == 0
    assert mb.bucket_of(mb.BOUNDS_US[0] + 1) == 1
    assert mb.bucket_of(10**12) == len(mb.BOUNDS_US)  # +Inf


def test_remote_time_is_counted_only_for_requests_that_waited():
    block = MetricsBlock(processors=1)
    region = block.processor(0)
    region.request(1, 1, 0.0, 0.0, 0.001, 0.001, 0.001)
    region.request(1, 1, 0.0, 0.0, 0.001, 0.501, 0.501)
    totals = block.totals()
    remote, remote_us = mb.latency(totals, mb.REMOTE, 1)
    local, local_us = mb.latency(totals, mb.LOCAL, 1)
    assert (remote.sum(), remote_us) == (1, 500_000)
    assert (local.sum(), local_us) == (2, 2_000)
    assert local[mb.bucket_of(1_000)] == 2 and remote[mb.bucket_of(500_000)] == 1


def test_each_phase_lands_in_its_own_histogram_and_total_spans_them_all():
    """Frame complete at 0, handler from 3 ms to 4 ms, answered after a 50 ms wait, written 200 ms later."""
    block = MetricsBlock(processors=1)
    region = block.processor(0)
    region.request(1, 2, 0.0, 0.003, 0.004, 0.054, 0.254)
    totals = block.totals()
    expected = {mb.QUEUE: 3_000, mb.LOCAL: 1_000, mb.REMOTE: 50_000, mb.SEND: 200_000, mb.TOTAL: 254_000}
    for kind, us in expected.items():
        buckets, summed = mb.latency(totals, kind, 1)
        assert buckets[mb.bucket_of(us)] == buckets.sum() == 2, mb.KINDS[kind]
        assert summed == pytest.approx(2 * us, abs=2), mb.KINDS[kind]
    assert totals[mb.REQUESTS + 1] == 2


def test_a_queue_time_never_goes_below_zero():
    block = MetricsBlock(processors=1)
    block.processor(0).request(3, 1, 1.0, 0.999, 1.0, 1.0, 1.0)
    buckets, summed = mb.latency(block.totals(), mb.QUEUE, 3)
    assert buckets[0] == 1 and summed == 0


def test_error_codes_out_of_range_land_in_the_edge_slots():
    block = MetricsBlock(processors=1)
    block.processor(0).error(2, 10_000)
    block.processor(0).error(2, -5)
    codes = block.totals()[mb.ERRORS + 2 * mb.ERROR_SLOTS: mb.ERRORS + 3 * mb.ERROR_SLOTS]
    assert codes[-1] == 1 and codes[0] == 1


def test_the_null_region_overrides_every_counting_method_with_nothing():
    """It has no words behind it: a Region method it did not override would fail on the empty buffer."""
    counting = {name for name, value in vars(Region).items() if callable(value) and not name.startswith("_")}
    assert counting and all(vars(NullRegion)[name] is not vars(Region)[name] for name in counting)
    assert NULL_REGION.on is False
    NULL_REGION.request(0, 1, 0.0, 0.0, 1.0, 2.0, 3.0)
    NULL_REGION.produced(1, 1)
    NULL_REGION.flushed(1.0)


def test_the_kernel_and_its_plain_python_reference_agree_on_random_requests():
    rng = np.random.default_rng(18)
    words = {name: np.zeros(mb.REGION_WORDS, np.int64) for name in ("kernel", "reference")}
    for _ in range(2_000):
        api, count = int(rng.integers(0, mb.MAX_API)), int(rng.integers(1, 40))
        stamps = np.cumsum(rng.exponential(rng.choice([1e-4, 1e-2, 3.0]), 5)) - rng.uniform(0, 1e-3)
        if rng.random() < 0.5:
            stamps[3] = stamps[2]  # answered at once: no remote time
        for name, fn in (("kernel", mb.record_request), ("reference", mb.record_request_py)):
            fn(words[name], api, count, *map(float, stamps))
    assert np.array_equal(words["kernel"], words["reference"])
    assert words["kernel"][mb.REQUESTS:mb.REQUESTS + mb.MAX_API].sum() > 0
