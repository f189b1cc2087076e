"""What exactly-once costs a producer: idempotence off and on, and transactions of 100, 1,000 and 10,000 records.

    python tools/bench_transactions.py [--records N] [--rounds R] [--size BYTES] [--batch B]
                                       [--processors P] [--cases off,on,100,1000,10000]

One standalone broker (loopback, two processors) and one one-partition topic, so
every case writes to the same partition with the same leader. mmlog's own Producer
(acks=all, batches of B records, 5 requests in flight) sends N records of BYTES
bytes per case and round with `send()`, one record at a time:

- "idempotence off" and "idempotence on": flush at the end;
- "txn of K": begin, K sends, commit, until N records are committed; the time of
  each `commit_transaction()` call (flush of the transaction's last batches, then
  EndTxn) is the commit latency.

The cases are interleaved within each round (a noisy machine treats them alike)
and the figures are medians over the rounds: msg/s, each case's ratio to
"idempotence off" in the same run, and the p50/p99 commit latency of the median round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.producer import Producer  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

TOPIC = "bench-txn"


def run_case(bootstrap: str, case: str, n: int, size: int, batch: int, rounds_done: int) -> tuple[float, list]:
    """(msg/s, commit latencies in ms) of one case."""
    value = b"x" * size
    txn_size = int(case.split()[-1]) if case.startswith("txn") else 0
    kwargs = {"enable_idempotence": case != "idempotence off"}
    if txn_size:
        kwargs["transactional_id"] = f"bench-{txn_size}-{rounds_done}"
    commits: list[float] = []
    with Producer(bootstrap, acks="all", linger_ms=5, max_batch_records=batch, batch_size=batch * (size + 80),
                  **kwargs) as producer:
        if txn_size:
            producer.init_transactions()
        start = time.perf_counter()
        sent = 0
        while sent < n:
            chunk = min(txn_size or n, n - sent)
            if txn_size:
                producer.begin_transaction()
            for _ in range(chunk):
                producer.send(TOPIC, value, partition=0)
            if txn_size:
                t = time.perf_counter()
                producer.commit_transaction()
                commits.append((time.perf_counter() - t) * 1000)
            sent += chunk
        producer.flush()
        elapsed = time.perf_counter() - start
    return n / elapsed, commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--processors", type=int, default=2)
    parser.add_argument("--cases", default="off,on,100,1000,10000",
                        help="off, on (idempotence) and transaction sizes, comma-separated")
    args = parser.parse_args()
    names = {"off": "idempotence off", "on": "idempotence on"}
    cases = [names.get(c, f"txn of {c}") for c in args.cases.split(",")]
    if "idempotence off" not in cases:
        cases.insert(0, "idempotence off")  # the baseline of every ratio
    rates: dict[str, list[float]] = {c: [] for c in cases}
    latencies: dict[str, list[list[float]]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp) / "broker", processors=args.processors) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic(TOPIC, 1)
        for warm in ("idempotence on", "txn of 1000"):  # warm-up: JIT, producer ids, the coordinator
            run_case(broker.bootstrap, warm, 2000, args.size, args.batch, -1)
        for r in range(args.rounds):
            for case in cases if r % 2 == 0 else reversed(cases):
                rate, commits = run_case(broker.bootstrap, case, args.records, args.size, args.batch, r)
                rates[case].append(rate)
                latencies[case].append(commits)
                print(f"round {r + 1} {case:>16}: {rate:>10,.0f} msg/s", file=sys.stderr)
    base = statistics.median(rates["idempotence off"])
    print(f"\n{args.records:,} records of {args.size} B per case, batch {args.batch}, acks=all, {args.rounds} rounds "
          f"(medians), {args.processors} processor(s)\n")
    print("| case | msg/s | MB/s | vs idempotence off | commit p50 ms | commit p99 ms |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        rate = statistics.median(rates[case])
        median_round = sorted(range(args.rounds), key=lambda i: rates[case][i])[args.rounds // 2]
        commits = latencies[case][median_round]
        p50, p99 = (f"{np.percentile(commits, q):.2f}" for q in (50, 99)) if commits else ("-", "-")
        print(f"| {case} | {rate:,.0f} | {rate * args.size / 1e6:.1f} | {rate / base:.2f} | {p50} | {p99} |")


if __name__ == "__main__":
    main()
