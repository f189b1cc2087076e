"""tools/bench_pipelined.py at a tiny size, on this tree alone (a baseline tree compiles its numba kernels afresh:
about a minute): the broker's CPU per record is measured, and the ratio is the rounds' own."""

from __future__ import annotations

from tools import bench_pipelined


def test_this_trees_round_measures_the_processors_cpu_within_the_whole_brokers(capsys):
    assert bench_pipelined.main(["--records", "50000", "--rounds", "1"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| after")]
    assert len(rows) == 1
    code, rounds, processors, broker, rate = (cell.strip() for cell in rows[0])
    assert rounds == "1"
    assert 0 < float(processors.split()[0]) <= float(broker.split()[0])  # the processors are part of the broker
    assert float(rate.split()[0].replace(",", "")) > 0


def test_the_ratio_pairs_each_round_of_this_tree_with_the_baselines_of_the_same_round():
    before = [{"processors_us": us, "broker_us": us, "rate": 1.0} for us in (1.0, 2.0, 4.0)]
    after = [{"processors_us": us, "broker_us": us, "rate": 1.0} for us in (0.5, 2.0, 5.0)]
    lines = bench_pipelined.table({"before": before, "after": after}, {"before": "before: a", "after": "after: b"})
    assert lines[-1] == ("After over before, processors' CPU per record, round by round: median 1.00 "
                         "(from 0.50 to 1.25; 1 of 3 rounds lower).")
