"""tools/bench_idle.py at a tiny size, on this tree alone (a baseline tree compiles its numba kernels afresh:
about a minute): an idle broker's CPU and wake-ups are measured over every thread of its processes."""

from __future__ import annotations

from tools import bench_idle


def test_this_trees_idle_broker_is_measured_window_by_window(capsys):
    assert bench_idle.main(["--windows", "2", "--seconds", "1", "--processors", "1"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| after")]
    assert len(rows) == 1
    code, windows, cpu, turns = (cell.strip() for cell in rows[0])
    assert windows == "2"
    assert float(cpu.split()[0]) > 0  # a broker with a processor, a control thread and timers is never at 0
    assert float(turns.split()[0]) > 1


def test_the_ratios_pair_each_window_of_this_tree_with_the_baselines_of_the_same_window():
    before = [{"cpu_ms": ms, "turns": n} for ms, n in ((10.0, 20.0), (20.0, 20.0), (40.0, 10.0))]
    after = [{"cpu_ms": ms, "turns": n} for ms, n in ((5.0, 10.0), (20.0, 10.0), (50.0, 10.0))]
    lines = bench_idle.table({"before": before, "after": after}, {"before": "before: a", "after": "after: b"})
    assert lines[-3] == "After over before, CPU, window by window: median 1.00 (from 0.50 to 1.25)."
    assert lines[-1] == "After over before, times on a CPU, window by window: median 0.50 (from 0.50 to 1.00)."
