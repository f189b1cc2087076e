"""Log compaction: the cleaner's throughput, and produce throughput with the cleaner busy versus idle.

    python tools/bench_compaction.py [--mb M] [--keys K] [--value-bytes V] [--seconds S]
                                     [--codecs none,gzip,snappy,lz4,zstd] [--segment-mb N] [--no-produce]
                                     [--memory [--baseline REF]]

1. Cleaning: a partition (segments of --segment-mb MiB, 8 by default) is filled with M MB
   of records of V-byte values over K keys, 10 records a batch, once per codec of --codecs
   (all five by default); one cleaning of the whole dirty log, in this process (no throttle).
   Prints MB/s of dirty log cleaned (bytes read / elapsed) and what was kept. With
   --memory, one more cleaning per codec in a fresh interpreter under tracemalloc (numpy
   reports its arrays to it), untimed: the cleaning's peak heap, on this tree's code and,
   with --baseline, on REF's (`git archive`, tools/bench/trees.py).
2. Produce: one broker (EmbeddedBroker, 2 processors), a compacted topic of 1 MiB
   segments, confluent-kafka producing V-byte values over K keys for S seconds, acks=1.
   Once with log.cleaner.enable=false, once with the cleaner on, looking every 100 ms
   with min.cleanable.dirty.ratio 0.01, so it cleans all the time. Prints msg/s of each
   and how many cleanings ran. --no-produce skips this part.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mmlog.config.settings import LogConfig  # noqa: E402
from mmlog.log.cleaner import kernels as compaction_kernels  # noqa: E402
from mmlog.log.cleaner.cleaner import STATUS_FILE, Cleaner  # noqa: E402
from mmlog.log.cleaner.windows import DECOMPRESS_LIMIT  # noqa: E402
from mmlog.log.cleaner.offset_map import OffsetMap  # noqa: E402
from mmlog.log.partition import Partition  # noqa: E402
from mmlog.protocol import compression  # noqa: E402
from mmlog.protocol import records as rec  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402


def bench_cleaning(mb: int, keys: int, value_bytes: int, codec: int, segment_mb: int = 8, trace: bool = False) -> dict:
    """One cleaning of `mb` MB; with `trace`, its peak heap (tracemalloc) as `peak_mb`."""
    with tempfile.TemporaryDirectory(prefix="mmlog-bench-compaction-") as d:
        config = LogConfig(segment_bytes=segment_mb << 20, cleanup_policy="compact")
        part = Partition(Path(d) / "t-0", config)
        value = b"v" * value_bytes
        i = 0
        while part.size_bytes() < mb * 1_000_000:
            batch = [(b"key-%d" % ((i + j) * 7919 % keys), value) for j in range(10)]
            part.append(rec.build_batch(batch, compression=codec))
            i += 10
        part.roll()
        dirty = part.size_bytes()
        cleaner = Cleaner(OffsetMap(128 << 20), crash_at="")
        if trace:  # allocated before, not counted: the offset map (log.cleaner.dedupe.buffer.size) and the
            # codecs' scratch buffer (DECOMPRESS_LIMIT, of which a decompression touches only what it writes)
            cleaner.map.clear()
            compression.decompress(compression.GZIP, compression.compress(compression.GZIP, b"x"), DECOMPRESS_LIMIT)
            tracemalloc.start()
        started = time.perf_counter()
        stats = cleaner.clean(part, 0)
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] if trace else 0
        tracemalloc.stop()
        after = part.size_bytes()
        part.close()
    return {"codec": compression.NAMES[codec], "dirty_mb": dirty / 1e6, "seconds": elapsed,
            "mb_per_s": dirty / 1e6 / elapsed, "records": stats.records_read, "kept": stats.records_kept,
            "after_mb": after / 1e6, "peak_mb": peak / 1e6}


def bench_produce(cleaner_on: bool, keys: int, value_bytes: int, seconds: float) -> dict:
    config = {"log.cleaner.enable": str(cleaner_on).lower(), "log.cleaner.backoff.ms": 100}
    with EmbeddedBroker(processors=2, config=config) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topic_config = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01"}
        admin.create_topics([NewTopic("bench", 1, 1, config=topic_config)])["bench"].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": 1})
        value = b"v" * value_bytes
        sent = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            for _ in range(1000):
                try:
                    producer.produce("bench", value, b"key-%d" % (sent % keys), partition=0)
                except BufferError:
                    producer.poll(0.01)
                    continue
                sent += 1
            producer.poll(0)
        producer.flush(30)
        elapsed = time.perf_counter() - started
        cleanings = 0
        if cleaner_on:
            time.sleep(0.5)
            status = json.loads((b.data_dir / STATUS_FILE).read_text()).get("bench-0", {})
            cleanings = sum(1 for line in b.log_lines if "cleaned bench-0" in line)
            cleanings = max(cleanings, 1 if "last_run" in status else 0)
    return {"cleaner": "on" if cleaner_on else "off", "msgs": sent, "msg_per_s": sent / elapsed,
            "cleanings": cleanings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd",
                        help="comma-separated codecs to clean (default: all five)")
    parser.add_argument("--segment-mb", type=int, default=8, help="the cleaned partition's segment size, MiB")
    parser.add_argument("--no-produce", action="store_true", help="only the cleaning part")
    parser.add_argument("--memory", action="store_true", help="also each cleaning's peak heap, in a fresh interpreter")
    parser.add_argument("--baseline", help="with --memory: a git ref whose code is measured too")
    args = parser.parse_args()
    by_name = {name: codec for codec, name in compression.NAMES.items()}
    try:
        codecs = [by_name[name] for name in args.codecs.split(",")]
    except KeyError as exc:
        parser.error(f"unknown codec {exc.args[0]!r} (one of {', '.join(by_name)})")
    compaction_kernels.warm()
    for codec in codecs:  # compile every kernel a cleaning uses (numba's cache may be cold), untimed
        bench_cleaning(1, 100, args.value_bytes, codec)
    print(f"cleaning {args.mb} MB of {args.value_bytes}-byte values over {args.keys} keys in {args.segment_mb} MiB "
          "segments (one cleaning, no throttle)")
    for codec in codecs:
        r = bench_cleaning(args.mb, args.keys, args.value_bytes, codec, args.segment_mb)
        print(f"  {r['codec']:5s} {r['dirty_mb']:7.1f} MB dirty in {r['seconds']:6.2f} s = {r['mb_per_s']:7.1f} MB/s; "
              f"{r['kept']:,} of {r['records']:,} records kept, {r['after_mb']:.1f} MB after")
    if args.memory:
        peak_memory(args, codecs)
    if args.no_produce:
        return 0
    print(f"producing {args.value_bytes}-byte values over {args.keys} keys for {args.seconds:g} s (confluent-kafka, "
          f"acks=1)")
    for on in (False, True):
        r = bench_produce(on, args.keys, args.value_bytes, args.seconds)
        print(f"  cleaner {r['cleaner']:3s}: {r['msg_per_s']:10,.0f} msg/s ({r['msgs']:,} records"
              + (f", {r['cleanings']} cleanings)" if on else ")"))
    return 0


def peak_memory(args, codecs: list[int]) -> None:
    """Each codec's cleaning under tracemalloc in a fresh interpreter: this tree's code, and the baseline's."""
    from tools.bench.trees import export_tree, head, run_in

    with tempfile.TemporaryDirectory(prefix="bench-compaction-tree-") as scratch:
        trees = [(head(), None)]
        if args.baseline:
            base_tree, base_commit = export_tree(args.baseline, Path(scratch))
            trees.insert(0, (base_commit, base_tree))
        print(f"peak heap of one cleaning besides its offset map and the codecs' scratch buffer (tracemalloc, a fresh "
              f"interpreter each, untimed), {args.segment_mb} MiB segments:")
        for codec in codecs:
            for commit, tree in trees:
                r = run_in(tree, "tools.bench_compaction",
                           f"bench_cleaning({args.mb}, {args.keys}, {args.value_bytes}, {codec}, {args.segment_mb}, "
                           "trace=True)")
                print(f"  {r['codec']:5s} {commit}: {r['peak_mb']:8.1f} MB peak, {r['dirty_mb']:.1f} MB dirty cleaned "
                      f"in {r['seconds']:.2f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
