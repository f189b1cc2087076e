"""A Prometheus scrape of a broker with 10,000 partitions: its cost to the main process, before and after.

    python tools/bench_scrape.py --baseline REF            # 100 topics x 100 partitions; prints the figures
    python tools/bench_scrape.py --baseline REF --record   # and writes its section of docs/benchmarks.md

The topics are made once (this tree's broker, one CreateTopics request); then, alternating for
`--rounds`, a broker of the baseline's code (`git archive` of `--baseline`) and one of this
tree's are started on that data directory with the metrics endpoint on, and `--scrapes`
GET /metrics are timed: wall time, and the main process's CPU (utime+stime from /proc, 10 ms
ticks) around each. The main process answers the scrape; with more partitions than it keeps
open (`log.max.open.partitions`, 1,250 by default on this machine), a scrape that opens each
partition to read its offsets pays for every reopen. Medians over the scrapes of every round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_scrape.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.servers import cpu_seconds  # noqa: E402
from tools.bench.trees import export_tree, head  # noqa: E402
from tools.bench_metadata import create_topics, log  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "metrics-scrape"
CONFIG = {"metrics.listen": "127.0.0.1:0", "auto.create.topics.enable": "false", "log.cleaner.enable": "false"}


def started_broker(data_dir: Path, tree: Path | None):
    """A broker on data_dir running the mmlog of `tree` (None: this tree's), with its metrics endpoint."""
    from mmlog.testing import EmbeddedBroker

    saved = dict(os.environ)
    if tree is not None:
        os.environ["PYTHONPATH"] = str(tree)  # the broker's `python -m mmlog` imports that tree's code
    try:
        return EmbeddedBroker(data_dir, processors=1, config=CONFIG, ready_timeout=600).start()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def metrics_url(broker) -> str:
    from mmlog.testing.scrape import metrics_address

    host, port = metrics_address(broker)
    return f"http://{host}:{port}/metrics"


def time_scrapes(broker, scrapes: int) -> list[tuple[float, float, int]]:
    """(wall s, main process CPU s, response bytes) of each scrape."""
    url, out = metrics_url(broker), []
    for _ in range(scrapes):
        cpu, wall = cpu_seconds([broker.pid]), time.perf_counter()
        with urllib.request.urlopen(url, timeout=600) as answer:
            size = len(answer.read())
        out.append((time.perf_counter() - wall, cpu_seconds([broker.pid]) - cpu, size))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="git ref of the code before")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--scrapes", type=int, default=3, help="scrapes per broker start")
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the baseline's broker and this tree's")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = " ".join(["python tools/bench_scrape.py", *(sys.argv[1:] if argv is None else argv)])

    with tempfile.TemporaryDirectory(prefix="bench-scrape-") as scratch:
        scratch = Path(scratch)
        base_tree, base_commit = export_tree(args.baseline, scratch)
        data = scratch / "data"
        b = started_broker(data, None)
        try:
            made = create_topics(b, args.topics, args.partitions)
        finally:
            b.stop()
        log(f"{args.topics * args.partitions:,} partitions made in {made:.0f} s")
        runs: dict[str, list] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for case, tree in (("before", base_tree), ("after", None)):
                b = started_broker(data, tree)
                try:
                    runs[case] += time_scrapes(b, args.scrapes)
                finally:
                    b.stop()
                log(f"{case}: {runs[case][-args.scrapes:]}")
    here = head()
    rows = []
    for case, label in (("before", f"before: {base_commit}, closed partitions reopened"),
                        ("after", f"after: {here}, closed partitions read from their state page")):
        wall = statistics.median(r[0] for r in runs[case]) * 1000
        cpu = statistics.median(r[1] for r in runs[case]) * 1000
        rows.append(f"| {label} | {wall:,.0f} | {cpu:,.0f} | {runs[case][0][2]:,} |")
    text = "\n".join([
        f"### A metrics scrape over {args.topics * args.partitions:,} partitions (one broker)", "",
        f"`{command}` ({time.strftime('%Y-%m-%d')}; the partitions were made in {made:.0f} s). GET /metrics, "
        f"{args.scrapes} scrapes per broker start, {args.rounds} starts of each code alternating, medians; the main "
        "process's CPU (utime+stime, 10 ms ticks) around each:", "",
        "| code | wall ms | main process CPU ms | response bytes |", "| --- | ---: | ---: | ---: |", *rows])
    show(text, SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
