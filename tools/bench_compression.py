"""Each codec side by side: produce and bulk-consume msg/s, and bytes on disk, for JSON-like events.

    python tools/bench_compression.py [--records N] [--rounds R] [--batch-size B]

One broker (EmbeddedBroker, loopback, 2 processors). Per round and codec (the
codecs interleaved, so a noisy machine treats them alike): mmlog's Producer
`send_many` of N events (about 180 bytes of JSON each, fields and values varying
as real click events do) in batches of B records, acks=1, into a fresh topic;
then the bulk consumer (`poll_batch`, numpy columns) reads them all back. Prints
the median msg/s of each side, the topic's bytes on disk per record and the ratio
to uncompressed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog import Consumer, Producer  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def events(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    pages = ["/", "/search", "/item/%d", "/cart", "/checkout", "/account/orders"]
    agents = ["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0)", "curl/8.4"]
    out = []
    for i in range(n):
        page = rng.choice(pages)
        out.append(json.dumps({
            "ts": 1_700_000_000_000 + i * 3, "user": f"u{rng.randrange(50_000)}", "session": rng.getrandbits(40),
            "event": rng.choice(["view", "click", "add_to_cart", "purchase"]),
            "page": page % rng.randrange(10_000) if "%d" in page else page, "agent": rng.choice(agents),
            "ms": rng.randrange(2, 900),
        }, separators=(",", ":")).encode())
    return out


def produce(bootstrap: str, topic: str, values: list[bytes], codec: str, batch: int) -> float:
    with Producer(bootstrap, compression_type=codec, linger_ms=5, max_batch_records=batch,
                  batch_size=1 << 20) as producer:
        producer.send(topic, b"warm", partition=0).get(10)
        start = time.perf_counter()
        for i in range(0, len(values), 50_000):
            producer.send_many(topic, values[i:i + 50_000], partition=0)
        producer.flush()
        return time.perf_counter() - start


def consume(bootstrap: str, topic: str, n: int) -> float:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_bytes=8 << 20)
    consumer.assign([(topic, 0)])
    got = 0
    start = time.perf_counter()
    while got < n:
        for arrays in consumer.poll_batch(1.0):
            got += len(arrays)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def disk_bytes(broker: EmbeddedBroker, topic: str) -> int:
    return sum(f.stat().st_size for f in (Path(broker.data_dir) / f"{topic}-0").glob("*.log"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=500)
    args = ap.parse_args(argv)
    values = events(args.records)
    raw = sum(map(len, values))
    rows: dict[str, list] = {c: [] for c in CODECS}
    with EmbeddedBroker(config={"log.flush.interval.messages": 10**12}) as broker:
        for r in range(args.rounds):
            for codec in CODECS:
                topic = f"bench-{codec}-{r}"
                p = produce(broker.bootstrap, topic, values, codec, args.batch_size)
                c = consume(broker.bootstrap, topic, args.records + 1)
                rows[codec].append((args.records / p, args.records / c, disk_bytes(broker, topic)))
                print(f"round {r + 1} {codec:7s} produce {args.records / p:>11,.0f} msg/s  "
                      f"consume {args.records / c:>11,.0f} msg/s", flush=True)
    print(f"\n{args.records:,} JSON events, {raw / args.records:.0f} B each on average, batches of "
          f"{args.batch_size}, {args.rounds} rounds (medians)")
    print(f"{'codec':8s}{'produce msg/s':>15s}{'consume msg/s':>15s}{'disk B/record':>15s}{'vs none':>9s}")
    base = statistics.median(r[2] for r in rows["none"])
    for codec in CODECS:
        produced = statistics.median(r[0] for r in rows[codec])
        consumed = statistics.median(r[1] for r in rows[codec])
        disk = statistics.median(r[2] for r in rows[codec])
        print(f"{codec:8s}{produced:>15,.0f}{consumed:>15,.0f}{disk / args.records:>15.1f}{disk / base:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
