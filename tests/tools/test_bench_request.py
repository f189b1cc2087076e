"""tools/bench_request.py on a small scale: the syscall baseline server answers real Produce requests, the
stage harness times every stage, the page section carries each row's figures, and servers taking turns
(`--paired`) each answer every request of their slices."""

import argparse

import pytest

from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from tools import bench_request as bench
from tools.bench import paired
from tools.bench.paired import slice_ratios
from tools.bench.servers import group_pids


def test_the_syscall_baseline_answers_awaited_produces_and_its_cpu_is_counted():
    row = bench.floor_row(300)
    assert row.records == row.requests == 300
    assert row.rate > 0 and row.cpu >= 0 and row.client_cpu > 0


def test_every_stage_of_one_request_is_timed_and_the_whole_path_too():
    stage_us, whole_us = bench.stages(rounds=1, n=50)
    assert list(stage_us) == bench.STAGES
    assert all(us > 0 for us in stage_us.values()) and whole_us > 0


def test_the_section_has_a_line_per_row_with_its_median_and_range():
    rows = [bench.Row("awaited, batch 1", 1000, 1000, 0.5, 0.05, 0.04),
            bench.Row("awaited, batch 1", 1000, 1000, 0.25, 0.07, 0.04)]
    args = argparse.Namespace(processors=1, rounds=2)
    text = bench.section(args, rows, dict.fromkeys(bench.STAGES, 1.0), 12.0)
    line = next(line for line in text.splitlines() if line.startswith("| awaited, batch 1 |"))
    assert line == "| awaited, batch 1 | 3,000 (2,000–4,000) | 60.0 (50.0–70.0) | 60.00 (50.00–70.00) | 40.00 (40.00–40.00) |"
    assert "| sum of the stages | 10.00 |" in text


def test_servers_taking_turns_each_answer_every_request_and_their_cpu_is_read_per_slice():
    with bench.floor() as (port, pid), EmbeddedBroker(processors=1) as broker:
        Admin(broker.bootstrap).create_topic("paired", 1)
        servers = [bench.kafka_server("broker", broker.bootstrap, group_pids(broker.pid), "paired"),
                   bench.kafka_server("floor", f"127.0.0.1:{port}", [pid], "floor")]
        tallies = paired.interleaved(servers, slices=4, per_slice=50, warm=10)
        with Admin(broker.bootstrap) as admin:
            assert admin.latest_offsets("paired") == {0: 210}  # the warm-up's 10 and every slice's
    assert [t.requests for t in tallies] == [200, 200]
    assert all(len(t.slices_us) == len(t.slices_rate) == 4 and t.cpu_ns > 0 and t.wall_ns > 0 for t in tallies)
    lines = paired.table(tallies, ["floor"])
    assert lines[2].startswith("| broker | 200 |") and lines[-1].startswith("| floor |")
    assert lines[-3].startswith("| broker over |")


def test_a_slice_ratio_pairs_the_slices_of_one_round():
    a = [10, 20, 30, 40, 50]
    b = [5, 40, 15, 20, 25]  # the second round was slow for b
    assert slice_ratios(a, b) == pytest.approx((1.25, 2.0, 2.0))  # quartiles of 2, 0.5, 2, 2, 2
