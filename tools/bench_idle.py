"""An idle broker's cost: its CPU and wake-ups a second, this tree beside a baseline, both idle at once.

    python tools/bench_idle.py --baseline REF            # 6 windows of 10 s; prints the table
    python tools/bench_idle.py --baseline REF --record   # and writes its section of docs/benchmarks.md
    python tools/bench_idle.py                           # this tree alone

Each tree's broker (EmbeddedBroker, 2 processors unless told, no client, nothing written) runs from an
interpreter of its own on that tree's code (tools/bench/trees.py; a baseline's numba kernels compile afresh,
about a minute). Once both are ready, both measure the same windows: over every thread of every process of
the broker, the CPU (schedstat, ns) and the times a thread was put on a CPU (schedstat's run count: its
wake-ups, and its preemptions), per second. An idle broker costs a few ms a second, which a shared host
moves from one minute to the next; the brokers share every window, so the window-by-window ratio is the
figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_idle.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.trees import export_tree, head, run_in, spread  # noqa: E402
from tools.bench_metadata import log  # noqa: E402

SECTION = "idle"
SETTLE_S = 3.0  # after both are ready: the start's own work done
FAILED = "failed"  # the meeting directory's mark that a case will never be ready


def child(case: str, meeting: str, cases: list[str], windows: int, seconds: float, processors: int) -> list[dict]:
    """In the process of one code tree: its idle broker's windows, once every case's broker is ready."""
    from mmlog.testing import EmbeddedBroker
    from tools.bench.mmlog_driver import COLD_START_S
    from tools.bench.paired import schedstat
    from tools.bench.servers import group_pids

    with tempfile.TemporaryDirectory(prefix="bench-idle-") as data, \
            EmbeddedBroker(Path(data) / "mmlog", processors=processors, ready_timeout=COLD_START_S) as broker:
        Path(meeting, case).touch()
        while not all(Path(meeting, c).exists() for c in cases):
            if Path(meeting, FAILED).exists():
                raise RuntimeError("another case failed before its broker was ready")
            time.sleep(0.1)
        time.sleep(SETTLE_S)
        pids = group_pids(broker.pid)
        got = []
        for _ in range(windows):
            before, started = schedstat(pids), time.monotonic()
            time.sleep(seconds)
            after, took = schedstat(pids), time.monotonic() - started
            got.append({"cpu_ms": (after[0] - before[0]) / 1e6 / took, "turns": (after[1] - before[1]) / took})
    return got


def measure(trees: dict[str, Path | None], windows: int, seconds: float, processors: int) -> dict[str, list]:
    """Every tree's broker idle at the same time, each from its own interpreter: their windows."""
    results: dict[str, list] = {}
    failures: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="bench-idle-meet-") as meeting:
        def run(case: str, tree: Path | None) -> None:
            try:
                results[case] = run_in(tree, "tools.bench_idle",
                                       f"child({case!r}, {meeting!r}, {list(trees)!r}, {windows}, {seconds}, "
                                       f"{processors})")
            except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
                failures.append(exc)
                Path(meeting, FAILED).touch()

        threads = [threading.Thread(target=run, args=item) for item in trees.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failures:
        raise failures[0]
    return results



def table(cases: dict[str, list[dict]], labels: dict[str, str]) -> list[str]:
    lines = ["| code | windows | CPU ms a second | times on a CPU a second |", "| --- | ---: | ---: | ---: |"]
    for case, got in cases.items():
        lines.append(f"| {labels[case]} | {len(got)} | {spread([g['cpu_ms'] for g in got], '.2f')} | "
                     f"{spread([g['turns'] for g in got], '.1f')} |")
    if "before" in cases:
        for key, what in (("cpu_ms", "CPU"), ("turns", "times on a CPU")):
            ratios = [a[key] / b[key] for a, b in zip(cases["after"], cases["before"]) if b[key]]
            lines += ["", f"After over before, {what}, window by window: median {statistics.median(ratios):.2f} "
                          f"(from {min(ratios):.2f} to {max(ratios):.2f})."]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--windows", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=10.0, help="a window's length")
    ap.add_argument("--processors", type=int, default=2)
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.windows <= 0 or args.seconds <= 0 or args.processors <= 0:
        ap.error("windows, seconds and processors must be positive")
    command = " ".join(["python tools/bench_idle.py", *(sys.argv[1:] if argv is None else argv)])
    labels = {"after": f"after: {head()}"}
    with tempfile.TemporaryDirectory(prefix="bench-idle-tree-") as scratch:
        trees: dict[str, Path | None] = {}
        if args.baseline:
            trees["before"], commit = export_tree(args.baseline, Path(scratch))
            labels["before"] = f"before: {commit}"
        trees["after"] = None
        cases = measure(trees, args.windows, args.seconds, args.processors)
    cases = {case: cases[case] for case in trees}
    for case, got in cases.items():
        log(f"{case}: " + ", ".join(f"{g['cpu_ms']:.2f} ms/s {g['turns']:.1f}/s" for g in got))
    text = "\n".join([
        f"### An idle broker ({args.processors} processor{'s' if args.processors > 1 else ''})", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}): "
        + ("the baseline's broker and this tree's, idle at the same time" if args.baseline else "this tree's broker, idle")
        + f", {args.windows} windows of {args.seconds:g} s; every thread of the broker's processes; medians with "
          f"their range:", "", *table(cases, labels)])
    show(text, SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
