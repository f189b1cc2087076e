"""Produce and consume over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) in one run: what TLS costs.

    python tools/bench_security.py [--records N] [--size BYTES] [--rounds R]

One broker (EmbeddedBroker, loopback, 2 processors) with the three listeners, a
fresh PKI made with `openssl` (EC P-256, the test suite's), and one user. Per round
and protocol (interleaved, so a noisy machine treats them alike): confluent-kafka
(librdkafka: its TLS is C, so the broker is what is measured) produces N records of
BYTES each into a fresh one-partition topic, acks=1, then a consumer reads them all
from the beginning. Prints the median msg/s and MB/s of each side and the ratio to
PLAINTEXT. `fetch` is the broker's send path alone: 8 MiB Fetch requests whose
bytes are dropped (mmlog's BrokerConnection; no record decoding). Over PLAINTEXT the broker sends fetched bytes with sendfile; over TLS it
reads them into a buffer and encrypts them (processors/sendfile.py), unless kernel
TLS is available (the line "kernel TLS" says whether it is on this machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka as ck  # noqa: E402

from mmlog.client.connection import BrokerConnection  # noqa: E402
from mmlog.protocol.messages import fetch  # noqa: E402
from mmlog.protocol.records import iter_batches  # noqa: E402
from mmlog.security.client import ClientSecurity  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402
from mmlog.testing.security import add_users, make_pki, security_config  # noqa: E402

PROTOCOLS = ["PLAINTEXT", "SSL", "SASL_SSL"]
SIDES = ("produce", "consume", "fetch")


def client_conf(broker, pki, protocol: str) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports[protocol]}", "security.protocol": protocol}
    if protocol != "PLAINTEXT":
        conf["ssl.ca.location"] = str(pki.ca)
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"})
    return conf


def produce(conf: dict, topic: str, n: int, value: bytes, **settings) -> float:
    """Seconds to produce n records (after one warm-up record); `settings` override the producer's."""
    producer = ck.Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                            "queue.buffering.max.messages": 1_000_000, **settings})
    producer.produce(topic, b"warm")
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - start


def consume(conf: dict, topic: str, n: int) -> float:
    consumer = ck.Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                            "max.partition.fetch.bytes": 8 << 20})
    consumer.assign([ck.TopicPartition(topic, 0, 1)])  # after the warm-up record
    got, start = 0, None  # timed from the first record: connecting and the first fetch's wait are not throughput
    while got < n:
        for msg in consumer.consume(10_000, 5):
            if not msg.error():
                if start is None:
                    start = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def fetch_all(broker, pki, protocol: str, topic: str, n: int) -> float:
    """Fetch the whole partition in 8 MiB requests and drop the bytes: the broker's send path alone
    (sendfile over PLAINTEXT, read + encrypt over TLS), without a client decoding records."""
    security = ClientSecurity.from_options(
        protocol, "SCRAM-SHA-512", "alice", "alice-secret", ssl_cafile=str(pki.ca)) if protocol != "PLAINTEXT" else None
    conn = BrokerConnection("127.0.0.1", broker.listener_ports[protocol], security=security)
    offset, start = 1, time.perf_counter()
    while offset < n + 1:
        conn.send(fetch.API_KEY, 11, fetch.REQUEST(
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=8 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": 8 << 20}]}]))
        records = conn.receive().responses[0].partitions[0].records
        for _, header in iter_batches(records):
            offset = header.base_offset + header.last_offset_delta + 1
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    value = os.urandom(args.size)
    work = Path(tempfile.mkdtemp(prefix="bench-security-"))
    (work / "pki").mkdir()
    pki = make_pki(work / "pki")
    add_users(work / "data")
    config = security_config(pki, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                             ssl_client_auth="none")
    times: dict[tuple[str, str], list[float]] = {}
    with EmbeddedBroker(work / "data", processors=2, config=config) as broker:
        ktls = [line for line in broker.log_lines if "kernel TLS" in line]
        print(f"kernel TLS: {ktls[-1].split('kernel TLS ')[-1] if ktls else 'no TLS listener'}")
        for round_ in range(args.rounds):
            for protocol in PROTOCOLS:
                conf = client_conf(broker, pki, protocol)
                topic = f"bench-{protocol.lower()}-{round_}"
                times.setdefault((protocol, "produce"), []).append(produce(conf, topic, args.records, value))
                times.setdefault((protocol, "consume"), []).append(consume(conf, topic, args.records))
                times.setdefault((protocol, "fetch"), []).append(fetch_all(broker, pki, protocol, topic,
                                                                           args.records))
                print(f"round {round_} {protocol}: " + ", ".join(
                    f"{side} {times[(protocol, side)][-1]:.2f} s" for side in SIDES), flush=True)
    mb = args.records * args.size / 1e6
    print(f"{args.records} records of {args.size} bytes, median of {args.rounds} rounds, confluent-kafka "
          f"{ck.version()[0]} / librdkafka {ck.libversion()[0]}")
    print(f"{'protocol':<10} {'side':<8} {'msg/s':>10} {'MB/s':>8} {'vs PLAINTEXT':>13}")
    for side in SIDES:
        base = statistics.median(times[("PLAINTEXT", side)])
        for protocol in PROTOCOLS:
            t = statistics.median(times[(protocol, side)])
            print(f"{protocol:<10} {side:<8} {args.records / t:>10,.0f} {mb / t:>8.1f} {base / t:>12.2f}x")


if __name__ == "__main__":
    main()
