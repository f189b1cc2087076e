"""tools/bench_spark.py --stages on a small scale: every stage reads every row, and the table has a line
per stage with the reader's and the broker's CPU."""

import argparse

from mmlog.testing import EmbeddedBroker
from tools import bench_spark as bench


def test_every_stage_reads_the_whole_topic_and_the_table_names_each(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=1) as broker:
        bench.fill(broker.bootstrap, "bench", 30_000, 200, 2)
        out = bench.staged(broker, "bench", 30_000, 200, runs=1)
    assert list(out) == list(bench.STAGES)
    assert all(len(runs) == 1 and runs[0][0] > 0 for runs in out.values())
    text = bench.stages_report(out, argparse.Namespace(records=30_000, size=200, partitions=2, runs=1))
    assert [line.split(" | ")[0][2:] for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:] \
        == list(bench.STAGES)
