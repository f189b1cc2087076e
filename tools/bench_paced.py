"""The producer at a paced rate (end-to-end latency) and flat out (`mmlog perf produce`), this tree against a
baseline's code, alternating in one run.

    python tools/bench_paced.py --baseline REF                  # 3 rounds; prints the tables
    python tools/bench_paced.py --baseline REF --record         # and writes its section of docs/benchmarks.md
    python tools/bench_paced.py --baseline REF --no-perf        # the latency rows only
    python tools/bench_paced.py --baseline-tree DIR             # the code before from a checkout as it is

Latency: the paper benchmark's end-to-end test (tools/bench/latency.py with mmlog's driver): a producer
process sends `--rate` records a second (linger 0, acks=1, each stamped with its send time; woken every
millisecond, it sends what is due: 5 records a tick at 5,000/s), a consumer process long-polls and measures
send -> receipt; one broker (EmbeddedBroker, 2 processors) per case. Throughput: the `mmlog perf produce`
rows of docs/benchmarks.md, each against a fresh broker. Each case runs in a fresh interpreter on the code of
`--baseline` (`git archive`, or a checkout: `--baseline-tree`) and of this tree (tools/bench/trees.py),
alternating for `--rounds` after a short uncounted round each; latency percentiles over each code's rounds
together, throughput the median of its rounds.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_paced.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.trees import export_tree, head, run_in  # noqa: E402
from tools.bench_metadata import log  # noqa: E402

SECTION = "bench_paced"
# the README's `mmlog perf produce` rows (docs/benchmarks.md, "mmlog perf"), at the sizes they were run
PERF_ROWS = (
    ("batch 50", "--records 2000000 --batch-size 50"),
    ("batch 1, acks 0", "--records 400000 --batch-size 1 --acks 0"),
    ("batch 1", "--records 200000 --batch-size 1"),
    ("batch 1, each awaited", "--records 20000 --batch-size 1 --await-each"),
    ("send() with linger", "--records 2000000 --batch-size 100000 --batch-bytes 16384"),
    ("send_many", "--records 3000000 --api send_many --batch-size 1000 --chunk 100000"),
)


def latency_child(rate: float, seconds: float) -> list[float]:
    """In the process of one code tree: send -> receipt in ms of every paced record (the steps of
    tools/bench/latency.measure, keeping every figure so that rounds pool)."""
    from tools.bench import mmlog_driver
    from tools.bench.common import ClientProcess

    count = int(rate * seconds)
    ctx = ClientProcess._ctx
    created, ready, go = ctx.Event(), ctx.Event(), ctx.Event()
    with tempfile.TemporaryDirectory(prefix="bench-paced-") as data, _broker(data, 1000) as broker:
        args = (broker.bootstrap, "latency")
        producer = ClientProcess(mmlog_driver.latency_producer, *args, rate, count, created, go)
        producer.wait_for(created, 120, "first message sent")
        consumer = ClientProcess(mmlog_driver.latency_consumer, *args, count, ready)
        consumer.wait_for(ready, 120, "first message received")
        go.set()
        producer.result(seconds * 4 + 60)
        ms = consumer.result(seconds * 4 + 60)
    return [round(float(x), 4) for x in ms]


def _broker(data: str, flush_ms: int | None):
    """tools/bench/mmlog_driver.server's broker, given long to start (a fresh tree compiles its kernels)."""
    from mmlog.testing import EmbeddedBroker

    return EmbeddedBroker(Path(data) / "mmlog", processors=2, ready_timeout=900,
                          config={} if flush_ms is None else {"log.flush.interval.ms": flush_ms})


def perf_child(args: str) -> float:
    """In the process of one code tree: `mmlog perf produce ARGS` against a fresh broker; its msg/s."""
    with tempfile.TemporaryDirectory(prefix="bench-paced-perf-") as data, _broker(data, None) as broker:
        out = subprocess.run([sys.executable, "-m", "mmlog", "perf", "produce", "--topic", "t", "--quiet",
                              "--bootstrap", broker.bootstrap, *args.split()], capture_output=True, text=True,
                             env=os.environ, timeout=900)
    if out.returncode == 2 and "unrecognized arguments" in out.stderr:
        return float("nan")  # a baseline from before the option: the row is this tree's alone
    if out.returncode:
        raise RuntimeError(f"mmlog perf produce {args} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    line = next(line for line in out.stdout.splitlines() if line.strip().endswith("MB/s"))
    return float(line.split("msg/s")[0].replace(",", "").strip())


def main(argv=None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--baseline-tree", type=Path,
                    help="a checkout of the code before, used as it is (its compiled kernels cached already)")
    ap.add_argument("--rate", type=float, default=5000, help="paced records a second (default 5,000)")
    ap.add_argument("--seconds", type=float, default=10, help="paced seconds a round (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the baseline's code and this tree's")
    ap.add_argument("--no-perf", dest="perf", action="store_false", help="the latency rows only")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = " ".join(["python tools/bench_paced.py", *(sys.argv[1:] if argv is None else argv)])
    here = head()
    waited: dict[str, list[float]] = {"before": [], "after": []}
    perf: dict[tuple[str, str], list[float]] = {}
    base_commit = None
    with tempfile.TemporaryDirectory(prefix="bench-paced-tree-") as scratch:
        cases = [("after", None)]
        if args.baseline_tree:
            base_tree = args.baseline_tree.resolve()
            base_commit = subprocess.run(["git", "-C", str(base_tree), "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True, check=True).stdout.strip()
            cases.insert(0, ("before", base_tree))
        elif args.baseline:
            base_tree, base_commit = export_tree(args.baseline, Path(scratch))
            cases.insert(0, ("before", base_tree))
        for case, tree in cases:  # a short round each, not counted: kernels compiled or loaded, files cached
            run_in(tree, "tools.bench_paced", f"latency_child({args.rate}, 1.0)")
        for r in range(args.rounds):
            for case, tree in cases:
                got = run_in(tree, "tools.bench_paced", f"latency_child({args.rate}, {args.seconds})")
                waited[case] += got
                p50, p99 = np.percentile(got, [50, 99])
                log(f"round {r + 1}, {case}: {len(got):,} records, p50 {p50:.2f} ms, p99 {p99:.2f} ms")
            if not args.perf:
                continue
            for label, perf_args in PERF_ROWS:
                for case, tree in cases:
                    rate = run_in(tree, "tools.bench_paced", f"perf_child({perf_args!r})")
                    perf.setdefault((label, case), []).append(rate)
                    log(f"round {r + 1}, {case}: perf produce {label}: {rate:,.0f} msg/s")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    codes = [("before", f"before: {base_commit}")] if base_commit else []
    codes.append(("after", f"after: {here}"))

    def row(case: str, label: str) -> str:
        p50, p99, p999, top = np.percentile(waited[case], [50, 99, 99.9, 100])
        return f"| {label} | {len(waited[case]):,} | {p50:.2f} | {p99:.2f} | {p999:.2f} | {top:.2f} |"

    lines = [
        "### The producer paced, and flat out", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end {load}): "
        + ("the baseline's code and this tree's alternate, " if base_commit else "")
        + f"{args.rounds} rounds. End-to-end latency (send -> a long-polling consumer has it) at "
          f"{args.rate:,.0f} msg/s paced for {args.seconds:g} s a round (linger 0, acks=1, 2 processors):", "",
        "| code | records | p50 ms | p99 ms | p99.9 ms | max ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(row(case, label) for case, label in codes)]
    if perf:
        lines += ["", "`mmlog perf produce --topic t ARGS`, each on a fresh broker (2 processors), median msg/s "
                      "of the rounds:", "",
                  "| row | ARGS | " + " | ".join(label for _, label in codes)
                  + (" | after / before |" if base_commit else " |"),
                  "| --- | --- | " + " | ".join("---:" for _ in codes) + (" | ---: |" if base_commit else " |")]
        for label, perf_args in PERF_ROWS:
            medians = [statistics.median(perf[(label, case)]) for case, _ in codes]
            cells = ["-" if math.isnan(m) else f"{m:,.0f}" for m in medians]  # nan: the baseline lacks the row
            if base_commit:
                cells.append("-" if any(map(math.isnan, medians)) else f"{medians[-1] / medians[0]:.2f}")
            lines.append(f"| {label} | `{perf_args}` | " + " | ".join(cells) + " |")
    show("\n".join(lines), SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
