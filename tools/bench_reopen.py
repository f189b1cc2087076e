"""What a processor pays to reopen a partition it closed to stay within its open-partition budget.

    python tools/bench_reopen.py --baseline REF            # 1,000 partitions, 3 rounds; prints the table
    python tools/bench_reopen.py --baseline REF --record   # and writes its section of docs/benchmarks.md

With clients spread over more partitions than a process keeps open (`log.max.open.partitions`,
1,250 by default under this machine's 20,000-descriptor limit), most requests reopen a partition:
the steady state of the 10,000-partition point of `tools/bench_curves.py`. Here, without a broker:
an owner LogManager makes `--partitions` partitions of 1 and of `--segments` segments; then an
attached LogManager (as a processor has) keeping 64 open appends one small batch to each in turn,
so that every append reopens its partition and closes another. Each case runs in a process of its
own on the code of `--baseline` (`git archive`) and of this tree, alternating for `--rounds`:
CPU (utime+stime) and wall time per reopen+append, and the process's descriptors at the end.
Medians over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_reopen.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.trees import export_tree, head, run_in  # noqa: E402
from tools.bench_metadata import log  # noqa: E402

SECTION = "reopen"
KEEP_OPEN = 64


def child(data_dir: str, partitions: int, segments: int) -> dict:
    """In the process of one code tree: make the partitions, then time the reopen+append cycles."""
    import resource

    from mmlog.config.settings import LogConfig
    from mmlog.log.manager import LogManager
    from mmlog.protocol.records import build_batch

    data_dir = Path(data_dir)
    owner = LogManager(data_dir, LogConfig(), max_open=KEEP_OPEN)
    owner.create_topic("t", partitions, {"segment.bytes": "1000"})
    filler = build_batch([(None, b"f" * 600)])  # more than half a segment: each one after the first rolls
    for p in range(partitions):
        part = owner.partition("t", p)
        for _ in range(segments):
            part.append(bytearray(filler))
    segments_made = len(owner.partition("t", 0).segment_bases())
    owner.alter_topic_config("t", {})  # the default segment size again: no roll while the clock runs
    owner.close()  # only the attached manager's descriptors are counted
    attached = LogManager(data_dir, LogConfig(), owner=False, max_open=KEEP_OPEN)
    batch = build_batch([(None, b"r" * 200)])

    def cycle() -> None:
        for p in range(partitions):
            attached.partition("t", p).append_many([bytearray(batch)])

    cycle()  # every partition opened once (its first faults) before the clock
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    cycle()
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"cpu_us": cpu / partitions * 1e6, "wall_us": wall / partitions * 1e6,
            "segments": segments_made, "fds": len(os.listdir("/proc/self/fd"))}


def run_case(tree: Path | None, partitions: int, segments: int) -> dict:
    """child() in a fresh interpreter on `tree`'s mmlog (None: this tree's), in a fresh data directory."""
    with tempfile.TemporaryDirectory(prefix="bench-reopen-") as data:
        return run_in(tree, "tools.bench_reopen", f"child({str(Path(data) / 'd')!r}, {partitions}, {segments})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="git ref of the code before")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--segments", type=int, default=6, help="segments of the partitions of the second case")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the baseline's code and this tree's")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = " ".join(["python tools/bench_reopen.py", *(sys.argv[1:] if argv is None else argv)])
    here = head()
    results: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reopen-tree-") as scratch:
        base_tree, base_commit = export_tree(args.baseline, Path(scratch))
        for _ in range(args.rounds):
            for segments in (1, args.segments):
                for case, tree in (("before", base_tree), ("after", None)):
                    got = run_case(tree, args.partitions, segments)
                    results.setdefault((case, segments), []).append(got)
                    log(f"{case}, {segments} segments: {got}")
    rows = []
    for segments in (1, args.segments):
        for case, commit in (("before", base_commit), ("after", here)):
            runs = results[(case, segments)]
            rows.append(f"| {runs[0]['segments']} | {case}: {commit} | "
                        f"{statistics.median(r['cpu_us'] for r in runs):,.0f} | "
                        f"{statistics.median(r['wall_us'] for r in runs):,.0f} | {runs[-1]['fds']:,} |")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = "\n".join([
        f"### Reopening a closed partition ({args.partitions:,} partitions, {KEEP_OPEN} kept open)", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end {load}). An attached "
        f"LogManager keeping {KEEP_OPEN} partitions open appends one 200-byte record to each of "
        f"{args.partitions:,} in turn, so every append reopens one; the baseline's code and this tree's "
        f"alternate, {args.rounds} rounds, medians:", "",
        "| segments a partition | code | CPU µs a reopen+append | wall µs | descriptors at the end |",
        "| ---: | --- | ---: | ---: | ---: |", *rows])
    show(text, SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
