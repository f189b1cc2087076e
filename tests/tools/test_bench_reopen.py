"""tools/bench_reopen.py at a tiny size: both codes run their cycles and the table has a row per code and size."""

from __future__ import annotations

from tools import bench_reopen


def test_each_code_reopens_partitions_of_one_and_of_several_segments(capsys):
    assert bench_reopen.main(["--baseline", "HEAD", "--partitions", "80", "--segments", "3", "--rounds", "1"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and ("before" in line or "after" in line)]
    assert [(int(r[0]), r[1].split(":")[0].strip()) for r in rows] == [
        (1, "before"), (1, "after"), (3, "before"), (3, "after")]
    assert all(float(r[2].replace(",", "")) > 0 for r in rows)  # CPU a reopen+append, measured
