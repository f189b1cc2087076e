"""What one roll costs the thread that appends: the append that seals a segment and starts the next, beside a plain one.

    python tools/bench_roll.py --baseline REF               # this tree and REF in turn, 4 rounds; prints the table
    python tools/bench_roll.py --dir /dev/shm               # this tree alone, on tmpfs (the CPU, not the file system)

One Partition per case in a fresh directory under `--dir` (default: the system's temporary directory), 1 MiB
segments with Kafka's default index size (10 MiB, preallocated), batches of 50 records of 200 bytes appended
until `--rolls` rolls have happened; an idempotent producer's batch first, so that the producer state a roll
writes down is not empty. The figure is each append's wall time, split by whether it rolled: in a broker that
append holds its processor, and every connection the processor serves waits for it. Each case runs in a fresh
interpreter on its tree's code (`tools/bench/trees.py`), the two trees alternating, the order swapped every
round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_roll.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.trees import run_in, taking_turns  # noqa: E402

SEGMENT_BYTES = 1 << 20


def child(rolls: int, where: str | None) -> dict:
    """In the process of one code tree: microseconds of each append that rolled and of the plain ones."""
    from mmlog.config.settings import LogConfig
    from mmlog.log import kernels, rolled_flush
    from mmlog.log.partition import Partition
    from mmlog.protocol import records as rec

    kernels.warm()
    batch = rec.build_batch([(None, b"x" * 200)] * 50)
    rolled, plain = [], []
    with tempfile.TemporaryDirectory(prefix="bench-roll-", dir=where) as data:
        p = Partition(Path(data) / "t-0", LogConfig(segment_bytes=SEGMENT_BYTES))
        p.append(rec.build_batch([(None, b"x" * 200)], producer_id=1, producer_epoch=0, base_sequence=0))
        while len(rolled) < rolls:
            before = len(p.segment_bases())
            start = time.perf_counter_ns()
            p.append(batch)
            took = (time.perf_counter_ns() - start) / 1e3
            (rolled if len(p.segment_bases()) != before else plain).append(took)
        rolled_flush.wait_idle()
        p.close()
    return {"rolled": rolled, "plain": plain}


def row(label: str, runs: list[dict]) -> str:
    rolled = [t for r in runs for t in r["rolled"]]
    plain = [t for r in runs for t in r["plain"]]
    p90 = statistics.quantiles(rolled, n=10)[8] if len(rolled) > 1 else rolled[0]
    return (f"| {label} | {len(rolled)} | {statistics.median(rolled):,.0f} | {p90:,.0f} | "
            f"{statistics.median(plain):.1f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--rolls", type=int, default=100, help="rolls a case")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", help="where the partitions are made (default: the temporary directory)")
    args = ap.parse_args(argv)
    if args.rolls <= 0 or args.rounds <= 0:
        ap.error("rolls and rounds must be positive")
    command = " ".join(["python tools/bench_roll.py", *(sys.argv[1:] if argv is None else argv)])
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with taking_turns(args.baseline, args.rounds, "bench-roll-tree-") as (labels, turns):
        for r, case, tree in turns:
            got = run_in(tree, "tools.bench_roll", f"child({args.rolls}, {args.dir!r})")
            runs[case].append(got)
            print(f"round {r + 1}, {case}: roll median {statistics.median(got['rolled']):,.0f} µs", flush=True)
    print(f"\n`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}): appends of 50 records of 200 bytes to 1 MiB "
          f"segments, {args.rolls} rolls a case, {args.rounds} rounds, µs:\n")
    print("| code | rolls | append that rolled, median | p90 | plain append, median |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for case in ("before", "after"):
        if runs[case]:
            print(row(labels[case], runs[case]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
