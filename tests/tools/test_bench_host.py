"""tools/bench_host.py at a tiny size: both tables are printed, every figure a positive number."""

from __future__ import annotations

from tools import bench_host


def test_both_tables_print_a_row_for_each_round_and_each_sleep(tmp_path, capsys):
    assert bench_host.main(["--rounds", "1", "--writes", "200", "--wakes", "2", "--dir", str(tmp_path)]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 1 + len(bench_host.SLEEPS_MS)
    assert all(float(cell.strip().rstrip("x")) > 0 for row in rows for cell in row[1:])
    assert list(tmp_path.iterdir()) == []  # the written files are gone


def test_a_wake_is_timed_in_thread_cpu_and_wall_time():
    cpu, wall = bench_host.after_sleep_us(0.2, 3)
    assert cpu > 0 and wall > 0
