"""How close to its quota a throttled client or replica runs: client byte-rate quotas and the replication throttle.

    PYTHONPATH=. python tools/bench_throttles.py [--cases produce,consume,replication] [--seconds 20]

The tests assert the quotas' accounting (a quota'd client moves no more than its quota allows, plus a first
burst; a free one is not throttled); the rates themselves depend on the machine, so they are measured here:

  produce      two librdkafka producers fed by one loop, one with a 1 MB/s producer_byte_rate: each one's
               acknowledged bytes a second over `--seconds` after the quota'd one's first burst (2 s).
  consume      a librdkafka consumer with a 1 MB/s consumer_byte_rate: its bytes a second over `--seconds`
               from 2.5 s after its first record (past the first burst).
  replication  three brokers on one ZooKeeper; a 3 MiB partition moved onto a new replica with the follower
               throttle at 512 KiB/s beside one moved free: each copy's bytes a second, the throttled one's
               past its first two seconds' worth.

One broker (or three) with quota windows of 2 x 1 s (Kafka's 11 would make a first burst ten seconds' worth),
loopback, in a temporary directory. Prints each figure and its ratio to the quota.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_throttles.py`
    sys.path.append(str(Path(__file__).resolve().parents[1]))

QUOTA = 1_000_000  # bytes a second
REPLICATION_RATE = 512 << 10
BURST_S = 2
VALUE = b"x" * 10_000
WINDOWS = {"quota.window.num": 2}


def produce(seconds: float) -> None:
    from confluent_kafka import Producer

    from mmlog.client.admin import Admin
    from mmlog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="bench-throttles-") as data, \
            EmbeddedBroker(data, processors=2, config=WINDOWS) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("quota-produce", 2)
        admin.alter_client_quotas({(("client-id", "slow"),): {"producer_byte_rate": QUOTA}})
        time.sleep(1)  # every processor has read the catalogue
        producers = {name: Producer({"bootstrap.servers": broker.bootstrap, "client.id": name, "linger.ms": 5,
                                     "batch.size": 65536, "log_level": 0}) for name in ("slow", "free")}
        acked = dict.fromkeys(producers, 0)

        def counter(name):
            def done(err, msg):
                if err is None:
                    acked[name] += len(msg.value())
            return done

        start, at_burst, burst_at = time.monotonic(), None, BURST_S
        while (now := time.monotonic() - start) < burst_at + seconds:
            for partition, (name, p) in enumerate(producers.items()):
                try:
                    p.produce("quota-produce", VALUE, partition=partition, callback=counter(name))
                except BufferError:
                    pass
                p.poll(0)
            if at_burst is None and now >= BURST_S:
                at_burst, burst_at = dict(acked), now
        end = dict(acked)
        for p in producers.values():
            p.purge()
            p.flush(10)
        for name in producers:
            rate = (end[name] - at_burst[name]) / (now - burst_at)
            print(f"produce  {name:4s}  {rate / 1e6:7.3f} MB/s over {now - burst_at:.1f} s  "
                  f"({rate / QUOTA:.2f} x the quota)")


def consume(seconds: float) -> None:
    from confluent_kafka import Consumer, Producer

    from mmlog.client.admin import Admin
    from mmlog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="bench-throttles-") as data, \
            EmbeddedBroker(data, processors=2, config=WINDOWS) as broker, Admin(broker.bootstrap) as admin:
        admin.create_topic("quota-fetch", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 65536})
        for _ in range(int((seconds + 6) * QUOTA / len(VALUE))):
            producer.produce("quota-fetch", VALUE)
            producer.poll(0)
        producer.flush(60)
        admin.alter_client_quotas({(("client-id", "slow-consumer"),): {"consumer_byte_rate": QUOTA}})
        time.sleep(1)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-consumer", "group.id": "qc",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
                             "max.partition.fetch.bytes": 65536})
        consumer.subscribe(["quota-fetch"])
        got, first, at_burst, deadline = 0, None, None, time.monotonic() + 30
        try:
            while (now := time.monotonic()) < deadline:
                msg = consumer.poll(0.1)
                got += len(msg.value()) if msg is not None and not msg.error() else 0
                if first is None and got:
                    first, deadline = now, now + BURST_S + 0.5 + seconds
                if first is not None and at_burst is None and now >= first + BURST_S + 0.5:
                    at_burst = got
        finally:
            consumer.close()
        rate = (got - at_burst) / (now - first - BURST_S - 0.5)
        print(f"consume       {rate / 1e6:7.3f} MB/s over {seconds:.1f} s  ({rate / QUOTA:.2f} x the quota; the "
              f"quota counts the bytes sent, the values delivered are fewer)")


def replication() -> None:
    import confluent_kafka

    from mmlog.client.admin import Admin
    from mmlog.client.records import TopicPartition
    from mmlog.testing import ZooKeeperServer
    from mmlog.testing.cluster import REPLICATION, by_id, moved_to, partition_state, three_brokers

    def log_size(broker, topic):
        return sum(f.stat().st_size for f in (Path(broker.data_dir) / f"{topic}-0").glob("*.log"))

    with tempfile.TemporaryDirectory(prefix="bench-throttles-") as tmp, \
            ZooKeeperServer(Path(tmp) / "zk") as zk, \
            three_brokers(Path(tmp), f"{zk.connect}/bench", **REPLICATION, **WINDOWS) as brokers, \
            Admin(brokers[0].bootstrap) as admin:
        plans = {}
        for topic in ("slow", "free"):
            admin.create_topic(topic, 1, replication_factor=1)
            producer = confluent_kafka.Producer({"bootstrap.servers": brokers[0].bootstrap, "linger.ms": 20,
                                                 "batch.size": 16384})
            for i in range(3 << 10):
                producer.produce(topic, b"%1024d" % i, partition=0)
                producer.poll(0)
            producer.flush(30)
            first = partition_state(brokers[0].bootstrap, topic)[0]
            plans[topic] = [first, next(b.broker_id for b in brokers if b.broker_id != first)]
        admin.set_replication_throttle(REPLICATION_RATE)
        admin.throttle_moves({TopicPartition("slow", 0): ([plans["slow"][0]], plans["slow"])})
        time.sleep(1.5)  # every broker has the configs
        sizes = {t: log_size(by_id(brokers, r[0]), t) for t, r in plans.items()}
        samples = {t: [] for t in plans}
        admin.alter_partition_reassignments({TopicPartition(t, 0): r for t, r in plans.items()})
        deadline = time.monotonic() + 120
        while any(not s or s[-1][1] < sizes[t] for t, s in samples.items()) and time.monotonic() < deadline:
            for t, s in samples.items():
                follower = by_id(brokers, plans[t][1])
                if (not s or s[-1][1] < sizes[t]) and (Path(follower.data_dir) / f"{t}-0").is_dir():
                    s.append((time.monotonic(), log_size(follower, t)))
            time.sleep(0.05)
        for t, s in samples.items():
            later = [(at, n) for at, n in s if n >= 2 * REPLICATION_RATE] if t == "slow" else s
            (t0, n0), (t1, n1) = later[0], later[-1]
            rate = (n1 - n0) / max(t1 - t0, 0.05)
            print(f"replication  {t:4s}  {rate / 1e6:7.3f} MB/s, {sizes[t]} B copied in {s[-1][0] - s[0][0]:.1f} s "
                  f"({rate / REPLICATION_RATE:.2f} x the throttle)")
        for t, r in plans.items():
            moved_to(brokers, t, r)
        admin.set_replication_throttle(None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="produce,consume,replication")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the client rates are measured")
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    if unknown := set(cases) - {"produce", "consume", "replication"}:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    if "produce" in cases:
        produce(args.seconds)
    if "consume" in cases:
        consume(args.seconds)
    if "replication" in cases:
        replication()
    return 0


if __name__ == "__main__":
    sys.exit(main())
