"""What replication and idempotence cost a producer: RF 1 acks=1, RF 3 acks=1, RF 3 acks=all, RF 3 acks=all idempotent.

    python tools/bench_replication.py [--records N] [--rounds R] [--batch B] [--size BYTES]

Three brokers (EmbeddedBroker, loopback, one processor each plus the replica
fetcher) on one ZooKeeper, all on this machine. Per round and case (the cases
interleaved, so a noisy machine treats them alike): librdkafka (confluent-kafka)
sends N records of BYTES bytes to a fresh one-partition topic led by broker 0,
in batches of B (`batch.num.messages`, linger 5 ms), and waits for every delivery
report. Prints, per case, the median msg/s over the rounds and the p50/p99 of
the produce latency (send to delivery report) of the median round, and each
case's throughput as a ratio to RF 1 acks=1 measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.cluster import Cluster  # noqa: E402
from mmlog.client.producer import Producer  # noqa: E402
from mmlog.testing import EmbeddedBroker, ZooKeeperServer  # noqa: E402

CASES = [("RF 1 acks=1", 1, "1", False), ("RF 3 acks=1", 3, "1", False), ("RF 3 acks=all", 3, "all", False),
         ("mmlog idem off", 3, "all", False), ("mmlog idem on", 3, "all", True)]


def leader(bootstrap: str, topic: str) -> int:
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([topic], allow_auto_create=False)
    info = meta.topics[topic]
    return info.leaders[0] if len(info.isr[0]) == len(info.replicas[0]) else -1


def make_topic(brokers, name: str, factor: int) -> None:
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(name, 1, replication_factor=factor)
    deadline = time.monotonic() + 30
    while leader(brokers[0].bootstrap, name) < 0:
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no leader with a full ISR after 30 s")
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, n: int, size: int, batch: int, acks: str,
            idempotent: bool) -> tuple[float, np.ndarray]:
    """(msg/s, latencies in ms) of n records through librdkafka."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": batch,
        "queue.buffering.max.messages": 1_000_000, "enable.idempotence": idempotent})
    value = b"x" * size
    sent = np.zeros(n)
    done = np.zeros(n)
    failures = []

    def delivered(err, msg, i=None):
        if err is not None:
            failures.append(err)

    start = time.perf_counter()
    for i in range(n):
        sent[i] = time.perf_counter()
        while True:
            try:
                producer.produce(topic, value, partition=0,
                                 on_delivery=lambda err, msg, i=i: (done.__setitem__(i, time.perf_counter()),
                                                                    delivered(err, msg)))
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{len(failures)} deliveries failed: {failures[0]}")
    return n / elapsed, (done - sent) * 1000


def produce_mmlog(bootstrap: str, topic: str, n: int, size: int, batch: int, idempotent: bool) -> tuple:
    """(msg/s, no latencies) of n records through mmlog's Producer, acks=all, 5 requests in flight."""
    value = b"x" * size
    start = time.perf_counter()
    with Producer(bootstrap, acks="all", enable_idempotence=idempotent, linger_ms=5, max_batch_records=batch,
                  max_in_flight=5) as producer:
        last = None
        for _ in range(n):
            last = producer.send(topic, value, partition=0)
        last.result(120)
    return n / (time.perf_counter() - start), np.array([])


def awaited(bootstrap: str, topic: str, sends: int, size: int, batch: int) -> np.ndarray:
    """Latencies (ms) of acks=all batches sent one at a time and awaited: the replication round trip."""
    with Producer(bootstrap, acks="all", linger_ms=0) as producer:
        producer.send_many(topic, [b"x" * size] * batch, partition=0).result(30)  # warm-up
        out = []
        for _ in range(sends):
            start = time.perf_counter()
            producer.send_many(topic, [b"x" * size] * batch, partition=0).result(30)
            out.append((time.perf_counter() - start) * 1000)
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--awaited", type=int, default=200, help="batches sent one at a time, per factor")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    with ZooKeeperServer(work / "zk") as zk:
        brokers = [EmbeddedBroker(work / f"broker-{i}", processors=1, config={
            "zookeeper.connect": zk.connect + "/bench", "broker.id": i, "auto.leader.rebalance.enable": False,
        }) for i in range(3)]
        try:
            for b in brokers:
                b.start()
            time.sleep(2)
            make_topic(brokers, "warm-up", 1)  # numba compiles the client's kernels here, not in a timed case
            warm = brokers[leader(brokers[0].bootstrap, "warm-up")].bootstrap
            for idempotent in (False, True):
                produce_mmlog(warm, "warm-up", 5000, args.size, args.batch, idempotent)
            results: dict[str, list[tuple[float, np.ndarray]]] = {name: [] for name, *_ in CASES}
            for r in range(args.rounds):
                for c, (name, factor, acks, idempotent) in enumerate(CASES):
                    topic = f"bench-{r}-{c}"
                    make_topic(brokers, topic, factor)
                    lead = brokers[leader(brokers[0].bootstrap, topic)]
                    if name.startswith("mmlog"):
                        results[name].append(produce_mmlog(lead.bootstrap, topic, args.records, args.size, args.batch,
                                                           idempotent))
                    else:
                        results[name].append(produce(lead.bootstrap, topic, args.records, args.size, args.batch,
                                                     acks, idempotent))
                    print(f"round {r + 1} {name}: {results[name][-1][0]:,.0f} msg/s", flush=True)
            round_trips = {}
            for factor in (1, 3):
                make_topic(brokers, f"awaited-{factor}", factor)
                lead = brokers[leader(brokers[0].bootstrap, f"awaited-{factor}")]
                round_trips[factor] = awaited(lead.bootstrap, f"awaited-{factor}", args.awaited, args.size, args.batch)
        finally:
            for b in brokers:
                b.stop()
    base = statistics.median(rate for rate, _ in results[CASES[0][0]])
    print(f"\n{args.records:,} records of {args.size} B, batch {args.batch}, librdkafka "
          f"{confluent_kafka.libversion()[0]}, median of {args.rounds} rounds")
    print(f"{'case':<16}{'msg/s':>12}{'MB/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'vs RF 1':>9}")
    for name, *_ in CASES:
        rounds = sorted(results[name], key=lambda x: x[0])
        rate, lat = rounds[len(rounds) // 2]
        p50, p99 = (f"{np.percentile(lat, q):>9.1f}" for q in (50, 99)) if len(lat) else (f"{'-':>9}", f"{'-':>9}")
        print(f"{name:<16}{rate:>12,.0f}{rate * args.size / 1e6:>8.1f}{p50}{p99}{rate / base:>9.2f}")
    for factor, lat in round_trips.items():
        print(f"one acks=all batch of {args.batch} at a time, RF {factor}: p50 {np.percentile(lat, 50):.2f} ms, "
              f"p99 {np.percentile(lat, 99):.2f} ms")
    plain = statistics.median(rate for rate, _ in results["mmlog idem off"])
    fenced = statistics.median(rate for rate, _ in results["mmlog idem on"])
    print(f"idempotence on / off (mmlog's Producer, RF 3 acks=all): {fenced / plain:.2f}")


if __name__ == "__main__":
    main()
