"""The broker's CPU per pipelined record: librdkafka at batch 50 flat out into one partition, two codes in turn.

    python tools/bench_pipelined.py --baseline REF            # 6 rounds of 2,000,000 records; prints the table
    python tools/bench_pipelined.py --baseline REF --record   # and writes its section of docs/benchmarks.md
    python tools/bench_pipelined.py                           # this tree alone
    python tools/bench_pipelined.py --syscalls                # and the processors' system calls (perf, root)

One broker (EmbeddedBroker, loopback, 1 processor unless told, `log.flush.interval.ms=1000`), one partition,
confluent-kafka (librdkafka) producing 200-byte records at batch 50 (linger 5 ms, 5 requests in flight,
acks=1: `tools/bench/kafka_driver.py`). The figure is the CPU the broker's processors spent (their threads'
schedstat, ns) per record over the measured run, after a warm-up that creates the topic and connects; the
whole broker's (the main process too: flush timer, metrics) beside it. Each case runs in a fresh interpreter
on the code of `--baseline` (`git archive`; its numba kernels compile afresh, about a minute) and of this
tree, alternating for `--rounds`, the order swapped every round; the ratio is this tree's over the
baseline's, round by round (each pair measured a minute apart on the same host). `--syscalls` adds what a
record's CPU is made of: the processors' system calls and their times on a CPU (each a wake-up, or a
preemption), per 1,000 records, counted on the kernel's tracepoints while the load runs at full speed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_pipelined.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.trees import run_in, spread, taking_turns  # noqa: E402
from tools.bench_metadata import log  # noqa: E402

SECTION = "pipelined"
BATCH = 50


def child(records: int, processors: int, syscalls: bool = False) -> dict:
    """In the process of one code tree: the broker's CPU (processors', whole) per record and the rate; the
    processors' times on a CPU and, with `syscalls`, their system calls, per 1,000 records."""
    from tools.bench import kafka_driver, mmlog_driver
    from tools.bench.common import ClientProcess
    from tools.bench.paired import cpu_ns, schedstat
    from tools.bench.servers import group_pids
    from tools.bench.syscalls import counted

    with tempfile.TemporaryDirectory(prefix="bench-pipelined-") as data, \
            mmlog_driver.server(Path(data), processors=processors) as broker:
        ready, go = ClientProcess._ctx.Event(), ClientProcess._ctx.Event()
        client = ClientProcess(kafka_driver.produce, broker.bootstrap, "pipelined", records, BATCH, ready, go)
        client.wait_for(ready, 120, "warm-up")
        workers, everyone = broker.processor_pids(), group_pids(broker.pid)
        with counted(workers) if syscalls else contextlib.nullcontext({}) as calls:
            before = schedstat(workers), cpu_ns(everyone)
            go.set()
            result = client.result(600)
            after = schedstat(workers), cpu_ns(everyone)
    per_k = 1000 / result["messages"]
    return {"processors_us": (after[0][0] - before[0][0]) / 1e3 / result["messages"],
            "broker_us": (after[1] - before[1]) / 1e3 / result["messages"],
            "rate": result["messages"] / result["seconds"], "turns_k": (after[0][1] - before[0][1]) * per_k,
            "syscalls_k": {name: n * per_k for name, n in calls.items()}}


def run_case(tree: Path | None, records: int, processors: int, syscalls: bool = False) -> dict:
    return run_in(tree, "tools.bench_pipelined", f"child({records}, {processors}, {syscalls})")



def table(cases: dict[str, list[dict]], labels: dict[str, str]) -> list[str]:
    lines = ["| code | rounds | processors' CPU µs / record | whole broker µs / record | msg/s |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for case, got in cases.items():
        if got:
            lines.append(f"| {labels[case]} | {len(got)} | {spread([g['processors_us'] for g in got], '.3f')} | "
                         f"{spread([g['broker_us'] for g in got], '.3f')} | "
                         f"{spread([g['rate'] for g in got], ',.0f')} |")
    if cases.get("before"):
        ratios = sorted(a["processors_us"] / b["processors_us"] for a, b in zip(cases["after"], cases["before"]))
        lines += ["", f"After over before, processors' CPU per record, round by round: median "
                      f"{statistics.median(ratios):.2f} (from {ratios[0]:.2f} to {ratios[-1]:.2f}; "
                      f"{sum(r < 1 for r in ratios)} of {len(ratios)} rounds lower)."]
    return lines


def syscall_table(cases: dict[str, list[dict]], labels: dict[str, str]) -> list[str]:
    """The processors' times on a CPU and system calls per 1,000 records, medians of the rounds: the calls
    any round made, in `syscalls.NAMED` order, then the others and the total."""
    from tools.bench.syscalls import NAMED

    made = {name for got in cases.values() for g in got for name in g["syscalls_k"]}
    names = [n for n in NAMED if n in made] + ["other", "total"]
    lines = ["| code | times on a CPU | " + " | ".join(names) + " |", "| --- | ---: |" + " ---: |" * len(names)]
    for case, got in cases.items():
        if got:
            cells = [statistics.median(g["syscalls_k"].get(n, 0.0) for g in got) for n in names]
            lines.append(f"| {labels[case]} | {statistics.median(g['turns_k'] for g in got):.1f} | "
                         + " | ".join(f"{c:.1f}" for c in cells) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--records", type=int, default=2_000_000, help="records a round")
    ap.add_argument("--processors", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=6, help="alternations of the baseline's code and this tree's")
    ap.add_argument("--syscalls", action="store_true",
                    help="count the processors' system calls (perf stat, root) and print them per 1,000 records")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.records <= 0 or args.rounds <= 0 or args.processors <= 0:
        ap.error("records, rounds and processors must be positive")
    command = " ".join(["python tools/bench_pipelined.py", *(sys.argv[1:] if argv is None else argv)])
    cases: dict[str, list[dict]] = {"before": [], "after": []}
    with taking_turns(args.baseline, args.rounds, "bench-pipelined-tree-") as (labels, turns):
        for r, case, tree in turns:
            got = run_case(tree, args.records, args.processors, args.syscalls)
            cases[case].append(got)
            log(f"round {r + 1}, {case}: processors {got['processors_us']:.3f} µs a record, whole broker "
                f"{got['broker_us']:.3f}, {got['rate']:,.0f} msg/s")
    if not args.baseline:
        del cases["before"]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = "\n".join([
        f"### The broker's CPU per pipelined record ({args.processors} processor"
        f"{'s' if args.processors > 1 else ''})", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end {load}): librdkafka at batch "
        f"{BATCH} flat out into one partition, {args.records:,} records of 200 bytes a round"
        + (", the baseline's code and this tree's in turn" if args.baseline else "")
        + f", {args.rounds} rounds; medians with their range:", "",
        *table(cases, labels)])
    if args.syscalls:
        text += "\n\n" + "\n".join([
            f"The processors' times on a CPU (schedstat's run count) and system calls (`perf stat` of the syscall "
            f"tracepoints) per 1,000 records, medians of the rounds ({BATCH} records a Produce request):", "",
            *syscall_table(cases, labels)])
    show(text, SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
