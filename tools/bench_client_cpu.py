"""The mmlog client's own CPU per record when records come one at a time: a paced producer's send() and a
long-polling consumer's poll_batch(), this tree against a baseline in turn.

    python tools/bench_client_cpu.py --baseline REF          # 4 rounds of 10,000 records at 5,000/s each
    python tools/bench_client_cpu.py --rate 2000 --rounds 6

At a few thousand records a second each record is a request of its own: the producer (linger 0, acks=1)
sends each `send()` as a Produce, and the consumer's long poll answers each with a Fetch of one record. What
a client spends on each is then its own code and its syscalls, and on two cores it is CPU the broker and
the other client do not get. Each case runs in a fresh interpreter on its tree's code (`tools/bench/trees.py`)
with a broker of its own (EmbeddedBroker, 1 processor): the producer case measures the producer's process
(its I/O thread too), paced by `tools/bench/latency.py`; the consumer case measures the consumer's process,
fed by a bare-frames producer in another process (`tools/bench/frames_driver.py`). CPU: the process's
utime+stime over the paced records, after a warm-up.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_client_cpu.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.trees import run_in, spread, taking_turns  # noqa: E402


def child(kind: str, records: int, rate: float) -> float:
    """In the process of one code tree: this process's CPU µs per record as the `kind` client."""
    from tools.bench import mmlog_driver

    with tempfile.TemporaryDirectory(prefix="bench-client-cpu-") as data, \
            mmlog_driver.server(Path(data), processors=1) as broker:
        return (_producer if kind == "producer" else _consumer)(broker.bootstrap, records, rate)


def _producer(bootstrap: str, records: int, rate: float) -> float:
    from tools.bench import mmlog_driver
    from tools.bench.common import MESSAGE_SIZE, payload
    from tools.bench.latency import paced

    value = payload(MESSAGE_SIZE)
    with mmlog_driver._producer(bootstrap, 1000, 1, linger_ms=0) as producer:
        send = producer.send
        paced(lambda n: [send("cpu", value) for _ in range(n)], rate, min(records, 1000))  # warm-up
        producer.flush()
        start = time.process_time_ns()
        paced(lambda n: [send("cpu", value) for _ in range(n)], rate, records)
        producer.flush()
        return (time.process_time_ns() - start) / 1e3 / records


def _consumer(bootstrap: str, records: int, rate: float) -> float:
    from mmlog.client.consumer import Consumer
    from tools.bench import frames_driver
    from tools.bench.common import ClientProcess

    created, go = ClientProcess._ctx.Event(), ClientProcess._ctx.Event()
    warm = 1000
    producer = ClientProcess(frames_driver.latency_producer, bootstrap, "cpu", rate, warm + records, created, go)
    try:
        producer.wait_for(created, 60, "topic created")
        with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=500) as consumer:
            consumer.assign([("cpu", 0)])
            consumer.seek_to_beginning()
            got = 0
            go.set()
            while got < warm:
                got += sum(len(arrays) for arrays in consumer.poll_batch(1.0))
            start, counted = time.process_time_ns(), got
            while got < warm + records:
                got += sum(len(arrays) for arrays in consumer.poll_batch(1.0))
            return (time.process_time_ns() - start) / 1e3 / (got - counted)
    finally:
        producer.stop(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--records", type=int, default=10_000, help="records a case")
    ap.add_argument("--rate", type=float, default=5000.0, help="records a second")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    if args.records <= 0 or args.rounds <= 0 or args.rate <= 0:
        ap.error("records, rate and rounds must be positive")
    command = " ".join(["python tools/bench_client_cpu.py", *(sys.argv[1:] if argv is None else argv)])
    got: dict[tuple[str, str], list[float]] = {}
    with taking_turns(args.baseline, args.rounds, "bench-client-cpu-tree-") as (labels, turns):
        for r, case, tree in turns:
            for kind in ("producer", "consumer"):
                us = run_in(tree, "tools.bench_client_cpu", f"child({kind!r}, {args.records}, {args.rate})")
                got.setdefault((case, kind), []).append(us)
                print(f"round {r + 1}, {case}, {kind}: {us:.1f} µs a record", flush=True)
    print(f"\n`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}): {args.records:,} records of 200 bytes at "
          f"{args.rate:,.0f} a second a case, {args.rounds} rounds; the client process's CPU µs per record, "
          "medians with their range:\n")
    print("| code | producer: send(), linger 0, acks=1 | consumer: poll_batch(), long polls |")
    print("| --- | ---: | ---: |")
    for case in ("before", "after"):
        if (case, "producer") in got:
            cells = [spread(got[case, kind], ".1f") for kind in ("producer", "consumer")]
            print(f"| {labels[case]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
