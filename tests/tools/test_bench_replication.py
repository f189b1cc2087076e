"""tools/bench_replication.py's own arithmetic, without starting any broker: the CPU per million records
and records per request of a case, the table's per-version ratios, and the /proc reading of the
kernel's share."""

import argparse
import os

import numpy as np
import pytest

from tools import bench_replication as bench
from tools.bench.servers import cpu_seconds


def test_a_cases_cpu_is_per_million_records_by_process_kind_and_its_requests_per_record(monkeypatch):
    readings = iter([{"processors": 1.0, "fetchers": 2.0, "main": 0.5, "sys": 0.25},
                     {"processors": 1.5, "fetchers": 2.2, "main": 0.6, "sys": 0.45}])
    asked = iter([{"Produce": 10, "Fetch": 3}, {"Produce": 2010, "Fetch": 203}])
    monkeypatch.setattr(bench, "broker_cpu", lambda brokers: next(readings))
    monkeypatch.setattr(bench, "requests", lambda brokers: next(asked))
    run = bench.measured([], 100_000, lambda: (50_000.0, np.array([1.0])))
    assert run.rate == 50_000.0
    assert run.cpu["processors"] == pytest.approx(5.0) and run.cpu["fetchers"] == pytest.approx(2.0)
    assert run.cpu["main"] == pytest.approx(1.0) and run.cpu["sys"] == pytest.approx(2.0)
    assert run.cpu["brokers"] == pytest.approx(8.0)  # the kinds, not the kernel's share again
    assert run.cpu["records/produce"] == 50 and run.cpu["records/fetch"] == 500


def test_each_row_is_compared_with_rf_1_of_its_own_tree():
    args = argparse.Namespace(size=200, records=100_000, batch=50)
    cpu = {k: 1.0 for k in (*bench.KINDS, "sys", "brokers", "client", "records/produce", "records/fetch")}
    runs = {"RF 1 acks=1": [bench.Run(100.0, np.array([]), cpu)],
            "RF 1 acks=1 (baseline)": [bench.Run(50.0, np.array([]), cpu)],
            "RF 3 acks=all": [bench.Run(80.0, np.array([1.0, 3.0]), cpu)],
            "RF 3 acks=all (baseline)": [bench.Run(40.0, np.array([]), cpu)]}
    plain, md = bench.table(args, runs, {})
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in md[2:]}
    assert rows["RF 3 acks=all"][5] == "0.80" and rows["RF 3 acks=all (baseline)"][5] == "0.80"
    assert rows["RF 3 acks=all (baseline)"][3:5] == ["-", "-"]  # no latencies sampled
    assert len(plain) == 5


def test_the_kernels_share_is_the_stime_part_of_a_processs_cpu():
    busy = os.getpid()
    sum(i * i for i in range(200_000))
    os.stat("/")
    assert 0 <= bench.kernel_seconds([busy]) <= cpu_seconds([busy])
    assert bench.kernel_seconds([2**22 + 1]) == 0  # gone processes count 0
