"""tools/bench_wire_kernels.py on a small scale: every row is timed and the table shows each with its ratio."""

from tools import bench_wire_kernels as bench


def test_every_row_is_timed_and_tabled():
    figures = {**bench.measure(calls=200, rounds=1), **bench.measure_fetch(calls=200, rounds=1)}
    assert len(figures) == 14 and all(us > 0 for us in figures.values())
    text = bench.table(figures)
    assert all(row in text for _, row in figures)
    assert text.count("| decode |") == text.count("| encode |") == 4
    assert text.count("| fetch decode |") == text.count("| fetch encode |") == 3
