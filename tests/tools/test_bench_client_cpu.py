"""tools/bench_client_cpu.py at a tiny size, on this tree alone: each client's CPU per record is measured."""

from __future__ import annotations

from tools import bench_client_cpu


def test_the_table_has_the_producers_and_the_consumers_cpu_for_this_tree(capsys):
    assert bench_client_cpu.main(["--records", "300", "--rounds", "1", "--rate", "3000"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| after")]
    assert len(rows) == 1
    producer, consumer = (float(cell.split()[0]) for cell in rows[0][1:])
    assert producer > 0 and consumer > 0
