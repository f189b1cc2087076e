"""tools/bench_roll.py at a tiny size, on this tree alone: the appends that rolled are told from the plain ones."""

from __future__ import annotations

from tools import bench_roll


def test_a_case_counts_the_rolls_it_was_asked_for_and_times_the_appends_between(tmp_path):
    got = bench_roll.child(3, str(tmp_path))
    assert len(got["rolled"]) == 3
    assert len(got["plain"]) >= 3 * 20  # 1 MiB segments of about 11 KB batches: dozens of appends a roll
    assert all(t > 0 for t in got["rolled"] + got["plain"])
    assert list(tmp_path.iterdir()) == []  # its partition went with its directory


def test_the_table_has_a_row_for_this_tree(tmp_path, capsys):
    assert bench_roll.main(["--rolls", "2", "--rounds", "1", "--dir", str(tmp_path)]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| after")]
    assert len(rows) == 1 and rows[0][1].strip() == "2"
