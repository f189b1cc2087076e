"""tools/bench_long_poll.py at a tiny size, on this tree alone (a baseline tree compiles its numba kernels afresh:
about 30 s): every parked fetch is answered after its produce, and the table counts the waits."""

from __future__ import annotations

from tools import bench_long_poll


def test_every_parked_fetch_is_answered_after_its_produce_and_the_table_counts_the_waits(capsys):
    assert bench_long_poll.main(["--produces", "160", "--rounds", "1", "--max-wait-ms", "300"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and ("before" in line or "after" in line)]
    assert [r[0].split(":")[0].strip() for r in rows] == ["after"]
    after = rows[0]
    assert int(after[1]) == 60  # the first 100 warm up
    assert 0 < float(after[2]) <= float(after[3]) <= float(after[5])  # p50 <= p99 <= max
    assert int(after[6]) == 0  # this tree loses no wake-up
