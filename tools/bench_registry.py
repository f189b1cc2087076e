"""The schema registry's speed and the cost of typed values, in one run.

    python tools/bench_registry.py [--lookups N] [--registrations N] [--records N] [--rounds R]

One standalone broker (EmbeddedBroker, loopback) with its registry listener. Per round:

* lookups: GET /schemas/ids/{id} over one persistent connection, N times, ids spread over the
  registered schemas (mmlog's client with its cache bypassed), and the same through confluent-kafka's
  SchemaRegistryClient with a fresh client per 100 lookups (its cache would answer the rest);
* registrations: N new schemas (a new field each) registered one at a time under one subject, each
  answered after the write to `_schemas` is acknowledged (acks=all) and applied;
* Avro per record, 200-byte-ish records of a flat schema: fastavro's schemaless_writer/reader alone
  (the baseline), mmlog's AvroSerializer/AvroDeserializer (framing, id cached), and the column kernel
  (mmlog.client.serde.avro_columns) decoding a whole chunk; confluent-kafka's AvroSerializer and
  AvroDeserializer beside them.

Prints medians over rounds: requests/s with p50/p99 latency, and µs per record with the ratio to
fastavro alone.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fastavro  # noqa: E402
import numpy as np  # noqa: E402

from mmlog.client.serde import avro_columns, wire  # noqa: E402
from mmlog.client.serde.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from mmlog.client.serde.registry import Schema, SchemaRegistry  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

SCHEMA = {"type": "record", "name": "Click", "namespace": "bench", "fields": [
    {"name": "user", "type": "long"}, {"name": "page", "type": "string"}, {"name": "referrer", "type": "string"},
    {"name": "ms", "type": "int"}, {"name": "score", "type": "double"}, {"name": "bot", "type": "boolean"},
    {"name": "agent", "type": ["null", "string"]}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def records(n: int) -> list[dict]:
    rng = np.random.default_rng(1)
    return [{"user": int(u), "page": f"/catalogue/item/{u % 9973:05d}/reviews?page={u % 7}",
             "referrer": "https://search.example.com/?q=" + "x" * int(u % 40), "ms": int(u % 5000),
             "score": float(s), "bot": bool(u & 1), "agent": None if u % 3 == 0 else "Mozilla/5.0 (X11; Linux) " * 2}
            for u, s in zip(rng.integers(0, 1 << 40, n).tolist(), rng.random(n).tolist())]


def latencies(call, n: int) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) of n calls made one after another."""
    times = np.empty(n)
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        call(i)
        times[i] = time.perf_counter() - t
    total = time.perf_counter() - start
    return n / total, float(np.percentile(times, 50) * 1e3), float(np.percentile(times, 99) * 1e3)


def per_record(call, n: int) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) / n * 1e6


def avro_round(registry: SchemaRegistry, url: str, recs: list[dict]) -> dict[str, float]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CkDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CkSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    n, parsed = len(recs), fastavro.parse_schema(SCHEMA)
    out: dict[str, float] = {}

    def fastavro_encode():
        for r in recs:
            b = io.BytesIO()
            fastavro.schemaless_writer(b, parsed, r)
    out["encode: fastavro alone"] = per_record(fastavro_encode, n)
    ser = AvroSerializer(registry, SCHEMA)
    framed = []
    out["encode: mmlog AvroSerializer"] = per_record(lambda: framed.extend(ser("clicks", r) for r in recs), n)
    ck = SchemaRegistryClient({"url": url})
    ctx = SerializationContext("clicks", MessageField.VALUE)
    ck_ser = CkSerializer(ck, json.dumps(SCHEMA))
    out["encode: confluent-kafka AvroSerializer"] = per_record(lambda: [ck_ser(r, ctx) for r in recs], n)

    bodies = [bytes(memoryview(v)[wire.HEADER:]) for v in framed]
    out["decode: fastavro alone"] = per_record(
        lambda: [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies], n)
    de = AvroDeserializer(registry)
    out["decode: mmlog AvroDeserializer"] = per_record(lambda: [de(v) for v in framed], n)
    ck_de = CkDeserializer(ck)
    out["decode: confluent-kafka AvroDeserializer"] = per_record(lambda: [ck_de(v, ctx) for v in framed], n)
    chunk = b"".join(framed)
    lengths = np.array([len(v) for v in framed], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    buf, plan = np.frombuffer(chunk, np.uint8), avro_columns.plan(parsed)
    avro_columns.decode(buf, starts[:10] + wire.HEADER, lengths[:10] - wire.HEADER, plan)  # compiled already

    def kernel():
        cols, bad = avro_columns.decode(buf, starts + wire.HEADER, lengths - wire.HEADER, plan)
        assert bad == -1
    out["decode: mmlog column kernel (whole chunk)"] = per_record(kernel, n)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=5000)
    parser.add_argument("--registrations", type=int, default=200)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    recs = records(args.records)
    rows: dict[str, list] = {}
    with EmbeddedBroker(config={"schema.registry.listeners": url}):
        registry = SchemaRegistry(url)
        base = [registry.register(f"bench-lookups-{i}", Schema(json.dumps({**SCHEMA, "name": f"L{i}"})))
                for i in range(20)]
        for r in range(args.rounds):
            rows.setdefault("lookup by id, mmlog client", []).append(
                latencies(lambda i: registry.request("GET", f"/schemas/ids/{base[i % len(base)]}"), args.lookups))
            fields = lambda i: SCHEMA["fields"] + [{"name": f"extra{i}", "type": "int", "default": 0}]  # noqa: E731
            subject = f"bench-registrations-{r}"
            rows.setdefault("registration (acks=all, applied)", []).append(latencies(
                lambda i: registry.register(subject, Schema(json.dumps({**SCHEMA, "fields": fields(i)}))),
                args.registrations))
            for name, value in avro_round(registry, url, recs).items():
                rows.setdefault(name, []).append(value)
        registry.close()
    print(f"\n{args.rounds} rounds, medians; {args.lookups} lookups, {args.registrations} registrations, "
          f"{args.records} records of about {len(records(1)[0]['page']) + 60} bytes\n")
    print("| request | per second | p50 ms | p99 ms |\n|---|---:|---:|---:|")
    for name in ("lookup by id, mmlog client", "registration (acks=all, applied)"):
        per_s, p50, p99 = (statistics.median(v[k] for v in rows[name]) for k in range(3))
        print(f"| {name} | {per_s:,.0f} | {p50:.2f} | {p99:.2f} |")
    print("\n| Avro, per record | µs | × fastavro alone |\n|---|---:|---:|")
    for name in [k for k in rows if k.startswith(("encode", "decode"))]:
        value = statistics.median(rows[name])
        base = statistics.median(rows[("encode" if name.startswith("encode") else "decode") + ": fastavro alone"])
        print(f"| {name} | {value:.2f} | {value / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
