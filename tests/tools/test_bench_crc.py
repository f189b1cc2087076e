"""tools/bench_crc.py at tiny sizes: every row agrees with the crc32c package before it is timed."""

from __future__ import annotations

import pytest

from tools import bench_crc


def test_each_size_gets_a_row_of_three_timings(capsys):
    assert bench_crc.main(["--sizes", "7,800,3000", "--rounds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "µs" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["7", "800", "3,000"]
    assert all(len(r.split("|")) == 6 for r in rows)


def test_sizes_must_be_positive_whole_numbers():
    for argv in (["--sizes", "0"], ["--sizes", "ten"], ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            bench_crc.main(argv)
