"""tools/bench_scrape.py at a tiny size: both codes' brokers start on one data dir and answer the same scrape."""

from __future__ import annotations

import re

from tools import bench_scrape


def test_both_brokers_are_scraped_and_the_table_has_a_row_each(capsys):
    assert bench_scrape.main(["--baseline", "HEAD", "--topics", "2", "--partitions", "3", "--scrapes", "1",
                              "--rounds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| before", "| after"))]
    assert len(rows) == 2
    sizes = {re.split(r"\s*\|\s*", row)[-2] for row in rows}
    assert len(sizes) == 1  # the same partitions, the same metrics
