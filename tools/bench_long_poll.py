"""How soon a parked fetch is answered after a produce: the broker's long-poll wake-up, end to end.

    python tools/bench_long_poll.py --baseline REF            # 3 rounds of 3,000 produces; prints the table
    python tools/bench_long_poll.py --baseline REF --record   # and writes its section of docs/benchmarks.md
    python tools/bench_long_poll.py                           # this tree alone

One broker with 2 processors (EmbeddedBroker, loopback), a one-partition topic, raw Kafka frames
(no client library). Two waiter connections take turns: each round trip sends a Fetch (min_bytes 1,
max_wait_ms `--max-wait-ms`) for the next offset, lets it park for 0-300 µs (random, so that the
produce lands at every point of the fetch's handling), then sends one awaited one-record Produce on
a third connection. The time from the Produce's send to the Fetch's answer is the figure. Connections
go to processors in turn, so one of the two waiters sits on the producer's processor and the other
on the other one; every produce is the next one's only chance to wake a fetch, so a lost wake-up
waits the whole max_wait_ms and is counted. Each case runs in a fresh interpreter on the code of
`--baseline` (`git archive`; its numba kernels compile afresh, about 30 s) and of this tree,
alternating for `--rounds`; percentiles over each code's rounds together.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_long_poll.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from tools.bench.page import show  # noqa: E402
from tools.bench.trees import export_tree, head, run_in  # noqa: E402
from tools.bench_metadata import log  # noqa: E402

SECTION = "long-poll"


def child(produces: int, max_wait_ms: int) -> list[float]:
    """In the process of one code tree: ms from each Produce's send to its parked Fetch's answer."""
    import random

    from mmlog.client.admin import Admin
    from mmlog.client.connection import BrokerConnection
    from mmlog.protocol import RequestHeader, encode_request
    from mmlog.protocol.messages import fetch, produce
    from mmlog.protocol.records import build_batch
    from mmlog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="bench-long-poll-") as data, \
            EmbeddedBroker(data, processors=2, ready_timeout=300) as broker:  # a fresh tree compiles first
        Admin(broker.bootstrap).create_topic("t", 1)
        host, port = broker.bootstrap.rsplit(":", 1)
        producer, *waiters = (BrokerConnection(host, int(port)) for _ in range(3))
        record = encode_request(RequestHeader(produce.API_KEY, 8, 1, "long-poll"), produce.REQUEST(
            acks=1, timeout_ms=30_000, topic_data=[{"name": "t", "partition_data": [
                {"index": 0, "records": build_batch([(None, bytes(200))])}]}]))

        def fetch_from(offset: int) -> bytearray:
            return encode_request(RequestHeader(fetch.API_KEY, 11, 2, "long-poll"), fetch.REQUEST(
                max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, topics=[{"topic": "t", "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]))

        shuffle = random.Random(20)
        waited = []
        for offset in range(produces):
            waiter = waiters[offset % 2]
            waiter.send_raw(fetch_from(offset))
            time.sleep(shuffle.uniform(0, 0.0003))
            sent = time.perf_counter()
            producer.send_raw(record)
            producer.receive_frame()
            waiter.receive_frame()
            waited.append((time.perf_counter() - sent) * 1000)
        for conn in (producer, *waiters):
            conn.close()
    return waited[100:]  # the first ones warm the connections up


def run_case(tree: Path | None, produces: int, max_wait_ms: int) -> list[float]:
    """child() in a fresh interpreter on `tree`'s mmlog (None: this tree's)."""
    return run_in(tree, "tools.bench_long_poll", f"child({produces}, {max_wait_ms})")


def row(label: str, waited: list[float], max_wait_ms: int) -> str:
    import numpy as np

    p50, p99, p999, top = np.percentile(waited, [50, 99, 99.9, 100])
    lost = sum(w >= max_wait_ms * 0.9 for w in waited)
    return f"| {label} | {len(waited):,} | {p50:.2f} | {p99:.2f} | {p999:.2f} | {top:.2f} | {lost} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", help="git ref of the code before (none: this tree alone)")
    ap.add_argument("--produces", type=int, default=3000, help="round trips a round")
    ap.add_argument("--max-wait-ms", type=int, default=1000, help="the fetches' max_wait_ms")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the baseline's code and this tree's")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    command = " ".join(["python tools/bench_long_poll.py", *(sys.argv[1:] if argv is None else argv)])
    here = head()
    waited: dict[str, list[float]] = {"before": [], "after": []}
    base_commit = None
    with tempfile.TemporaryDirectory(prefix="bench-long-poll-tree-") as scratch:
        cases = [("after", None)]
        if args.baseline:
            base_tree, base_commit = export_tree(args.baseline, Path(scratch))
            cases.insert(0, ("before", base_tree))
        for r in range(args.rounds):
            for case, tree in cases:
                got = run_case(tree, args.produces, args.max_wait_ms)
                waited[case] += got
                log(f"round {r + 1}, {case}: {len(got)} answers, slowest {max(got):.1f} ms")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = "\n".join([
        "### A parked fetch's answer after a produce (2 processors)", "",
        f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}, load average at end {load}). Milliseconds from an "
        f"awaited one-record Produce's send to the answer of a Fetch parked for it (max_wait_ms "
        f"{args.max_wait_ms:,}), half the fetches on the producer's processor and half on the other; "
        + ("the baseline's code and this tree's alternate, " if base_commit else "")
        + f"{args.rounds} rounds of {args.produces:,}:", "",
        "| code | answers | p50 ms | p99 ms | p99.9 ms | max ms | answered only at max_wait_ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *([row(f"before: {base_commit}", waited["before"], args.max_wait_ms)] if base_commit else []),
        row(f"after: {here}", waited["after"], args.max_wait_ms)])
    show(text, SECTION, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
