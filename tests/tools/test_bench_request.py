"""tools/bench_request.py on a small scale: the syscall baseline server answers real Produce requests, the
stage harness times every stage, and the page section carries each row's figures."""

import argparse

from tools import bench_request as bench


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
