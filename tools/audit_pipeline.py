"""The Kafka paper's audit pipeline (§5, LinkedIn), end to end against a local broker, in one command.

    python tools/audit_pipeline.py --out /tmp/audit [--bootstrap HOST:PORT | --embedded] [--lose 25]
    python tools/audit_pipeline.py --out DIR {produce,load,reconcile}      # one step at a time

The paper: every producer periodically publishes, to a separate audit topic, a
monitoring event with the number of messages it published to each topic in a
fixed time window; the consumers count what they loaded and compare. Here:

1. produce: producers publish events to `events` (the key names the producer; the
   timestamp is the event time), and after each window's events are acknowledged,
   one record to `audit`: {"producer", "topic", "window", "count"}. `--lose N`
   makes the first producer count N events it never sends (loss in transit).
2. load: a Spark job reads `events` through the mmlog source, from where the last
   successful load ended (earliest the first time) to the latest offsets at its
   start, writes Parquet partitioned by the events' hour, and records the offsets
   it loaded only once the job has succeeded. A rerun resumes there: nothing twice.
3. reconcile: counts the loaded events per producer and window, compares them with
   the audit records, and prints a loss report.

The demo (no step named) produces half the windows (creating the topics), loads,
produces the rest (with --lose, the loss), loads again (resuming), loads once
more (nothing new), and reconciles.

With a schema registry (`--registry URL`, or `--embedded`, whose broker serves one), the events
are Avro records, as the paper's are: each carries the id of its schema, the first half of the
windows written with `Event` version 1 and the rest with version 2 (a field added with a
default); each audit record counts one producer's events of one schema in its window; the load
decodes the values by their ids into columns (the source's valueFormat=avro) and keeps each
event's schema id; reconcile compares per schema id as well.

Load's crash points (the ledger, `<out>/ledger.json`, is the commit point; it is
replaced atomically with os.replace):
  a. during the Spark job, or after it and before the ledger is written: the
     output is in `<out>/staging/load-<n>/`, unknown to the ledger. The next load
     deletes it and loads the same offsets again.
  b. after the ledger is written, while files move from staging to `<out>/data/`:
     the next load finishes the move (a file is in one place or the other).
The audit offsets are snapshotted *before* the event offsets: an audit record is
published after its window's events are acknowledged, so every audited window's
events lie below the event snapshot, and reconcile compares only those windows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mmlog.client import Admin, Producer
from mmlog.client.records import TopicPartition
from mmlog.spark.offsets import from_json, to_json
from mmlog.spark.session import local_session, stop_session
from mmlog.testing import EmbeddedBroker
from mmlog.cli import BOOTSTRAP

EVENTS, AUDIT = "events", "audit"
EVENT_V1 = {"type": "record", "name": "Event", "namespace": "audit", "fields": [
    {"name": "producer", "type": "string"}, {"name": "window", "type": "int"}, {"name": "seq", "type": "int"}]}
EVENT_V2 = {**EVENT_V1, "fields": EVENT_V1["fields"] + [{"name": "region", "type": "string", "default": "eu"}]}
WINDOW_MS = 15 * 60 * 1000  # the audit window: four a hour
HOUR_MS = 3600 * 1000


# ------------------------------------------------------------------ 1. produce

def produce(bootstrap: str, *, producers: int = 3, windows: range = range(8), per_window: int = 500,
            lose: int = 0, epoch_ms: int | None = None, events: str = EVENTS, audit: str = AUDIT,
            registry: str | None = None, schema: dict = EVENT_V1) -> int:
    """Each producer publishes per_window events per window and then the window's audit record; the first
    producer's first window loses `lose` of them. Creates the topics if need be; returns the events sent.
    With `registry`: Avro events of `schema`, the audit records counting per schema id."""
    with Admin(bootstrap) as admin:
        existing = admin.list_topics()
        for name, partitions in ((events, 3), (audit, 1)):
            if name not in existing:
                admin.create_topic(name, partitions=partitions)
    epoch_ms = _epoch() if epoch_ms is None else epoch_ms
    rng = np.random.default_rng(windows.start)
    sent = 0
    serialize = schema_id = None
    if registry is not None:
        from mmlog.client.serde import AvroSerializer, SchemaRegistry

        serialize = AvroSerializer(SchemaRegistry(registry), schema)
        schema_id = serialize.schema_id(events)
    with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        for w in windows:
            start = epoch_ms + w * WINDOW_MS
            for p in range(producers):
                name = f"producer-{p}"
                n = per_window - (lose if p == 0 and w == windows.start else 0)
                stamps = np.sort(rng.integers(start, start + WINDOW_MS, n))
                if serialize is None:
                    values = [b"%s event %d of window %d" % (name.encode(), i, w) for i in range(n)]
                else:
                    values = [serialize(events, {"producer": name, "window": w, "seq": i, "region": "us"})
                              for i in range(n)]
                producer.send_many(events, values, keys=[name.encode()] * n, timestamps=stamps).result(timeout=60)
                record = {"producer": name, "topic": events, "window": start, "count": per_window}
                if schema_id is not None:
                    record["schema_id"] = schema_id
                producer.send(audit, json.dumps(record).encode(), key=name, timestamp=start + WINDOW_MS).get(60)
                sent += n
    return sent


def _epoch() -> int:
    """Event time starts on an hour boundary, a day ago (so the hour partitions are whole)."""
    return (int(time.time() * 1000) // HOUR_MS - 24) * HOUR_MS


# ------------------------------------------------------------------ 2. load

@dataclass
class Ledger:
    """The loads that succeeded, in order: their event offsets [from, until) and the audit snapshot."""

    path: Path
    loads: list[dict] = field(default_factory=list)

    @classmethod
    def read(cls, out: Path) -> "Ledger":
        path = out / "ledger.json"
        return cls(path, json.loads(path.read_text())["loads"] if path.exists() else [])

    def commit(self, load: dict) -> None:
        """Add a load: write a new ledger beside the old, flush it, and rename it over the old."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"loads": self.loads + [load]}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.loads.append(load)

    def until(self, key: str) -> dict[TopicPartition, int] | None:
        return from_json(self.loads[-1][key]) if self.loads else None


def load(spark, bootstrap: str, out: Path, *, events: str = EVENTS, audit: str = AUDIT,
         registry: str | None = None) -> int:
    """Load the events since the last successful load into Parquet by hour; return how many were loaded.
    With `registry`: the values decoded into columns by their schema ids, which are kept."""
    out.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.read(out)
    _recover(out, ledger)
    with Admin(bootstrap) as admin:
        audit_until = {TopicPartition(audit, p): o for p, o in admin.latest_offsets(audit).items()}
        events_until = {TopicPartition(events, p): o for p, o in admin.latest_offsets(events).items()}
    start = ledger.until("events_until") or {}
    if all(start.get(tp, 0) >= o for tp, o in events_until.items()):
        print(f"load: nothing new in {events} since load {len(ledger.loads)}")
        return 0
    n = len(ledger.loads) + 1
    staging = out / "staging" / f"load-{n}"
    reader = (spark.read.format("mmlog").option("bootstrap", bootstrap).option("subscribe", events)
              .option("startingOffsets", json.dumps(to_json(start)) if start else "earliest")
              .option("endingOffsets", json.dumps(to_json(events_until))))
    columns = ["CAST(key AS STRING) AS producer", "value", "partition", "offset", "timestamp",
               "date_format(timestamp, 'yyyy-MM-dd-HH') AS hour"]
    if registry is not None:
        reader = reader.option("valueFormat", "avro").option("schemaRegistry", registry)
        columns[1:2] = ["value.seq", "valueSchemaId AS schema_id"]  # the fields every version has
    df = reader.load().selectExpr(*columns)
    df.write.mode("overwrite").partitionBy("hour").parquet(str(staging))
    rows = spark.read.parquet(str(staging)).count()
    ledger.commit({"load": n, "events_from": to_json(start), "events_until": to_json(events_until),
                   "audit_until": to_json(audit_until), "rows": rows})
    _publish(out, staging)
    print(f"load {n}: {rows} events from {events} at offsets {to_json(start) or 'earliest'} "
          f"up to {to_json(events_until)}")
    return rows


def _recover(out: Path, ledger: Ledger) -> None:
    """Finish the move of a committed load's files (crash point b); drop an uncommitted one's (a)."""
    committed = {entry["load"] for entry in ledger.loads}
    for staging in sorted((out / "staging").glob("load-*")):
        if int(staging.name.split("-")[1]) in committed:
            _publish(out, staging)
        else:
            shutil.rmtree(staging)


def _publish(out: Path, staging: Path) -> None:
    """Move a load's Parquet files into <out>/data/hour=.../, named after the load, then drop its staging."""
    for part in staging.glob("hour=*/*.parquet"):
        target = out / "data" / part.parent.name / f"{staging.name}-{part.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
    shutil.rmtree(staging)
    with contextlib.suppress(OSError):  # the last load out of staging
        staging.parent.rmdir()


# ------------------------------------------------------------------ 3. reconcile

@dataclass
class Report:
    """Per audited (producer, window): published (the audit's count) against loaded."""

    windows: int
    published: int
    loaded: int
    losses: list[tuple[str, int, int, int]]  # producer, window start ms, published, loaded
    by_schema: dict[int, tuple[int, int]] = field(default_factory=dict)  # schema id: (published, loaded)

    @property
    def lost(self) -> int:
        return sum(p - n for _, _, p, n in self.losses)

    def lines(self) -> list[str]:
        out = [f"audit: {self.windows} producer windows audited, {self.published} events published, "
               f"{self.loaded} loaded"]
        out += [f"schema {sid}: {published} events published, {loaded} loaded"
                for sid, (published, loaded) in sorted(self.by_schema.items())]
        for producer, window, published, loaded in self.losses:
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(window / 1000))
            kind = "LOSS" if loaded < published else "EXTRA"
            out.append(f"{kind} {producer} window {when} UTC: published {published}, loaded {loaded}")
        out.append(f"result: {self.lost} events lost" if self.losses else "result: no loss")
        return out


def reconcile(spark, bootstrap: str, out: Path, *, audit: str = AUDIT) -> Report:
    """Compare the loaded events with the audit records of the last load's audit snapshot; print the report."""
    ledger = Ledger.read(out)
    if not ledger.loads:
        raise SystemExit("reconcile: nothing loaded yet (run load first)")
    until = ledger.until("audit_until")
    data = spark.read.parquet(str(out / "data"))
    keys = ["producer", "window"] + (["schema_id"] if "schema_id" in data.columns else [])
    audited = (spark.read.format("mmlog").option("bootstrap", bootstrap).option("subscribe", audit)
               .option("endingOffsets", json.dumps(to_json(until))).load()
               .selectExpr("from_json(CAST(value AS STRING), "
                           "'producer STRING, window LONG, count LONG, schema_id INT') AS a")
               .selectExpr("a.producer", "a.window", "a.schema_id", "a.count AS published")
               .groupBy(*keys).sum("published").withColumnRenamed("sum(published)", "published"))
    loaded = (data.selectExpr("producer", f"unix_millis(timestamp) DIV {WINDOW_MS} * {WINDOW_MS} AS window",
                              *keys[2:])
              .groupBy(*keys).count().withColumnRenamed("count", "loaded"))
    rows = audited.join(loaded, keys, "left").fillna(0, ["loaded"]).orderBy(*keys).collect()
    report = Report(len(rows), sum(r.published for r in rows), sum(r.loaded for r in rows),
                    [(r.producer, r.window, r.published, r.loaded) for r in rows if r.published != r.loaded])
    if "schema_id" in keys:
        for schema_id in sorted({r.schema_id for r in rows}):
            mine = [r for r in rows if r.schema_id == schema_id]
            report.by_schema[schema_id] = (sum(r.published for r in mine), sum(r.loaded for r in mine))
    print("\n".join(report.lines()))
    return report


# ------------------------------------------------------------------ the command

def demo(spark, bootstrap: str, out: Path, *, lose: int = 0, windows: int = 8, per_window: int = 500,
         events: str = EVENTS, audit: str = AUDIT, registry: str | None = None) -> Report:
    """Half the windows, a load, the rest (with the loss), a resumed load, an idle load, reconcile; with a
    registry, the second half written with the second version of the events' schema."""
    topics = {"events": events, "audit": audit}
    epoch = _epoch()
    half = windows // 2
    produce(bootstrap, windows=range(half), per_window=per_window, epoch_ms=epoch, registry=registry, **topics)
    load(spark, bootstrap, out, registry=registry, **topics)
    produce(bootstrap, windows=range(half, windows), per_window=per_window, lose=lose, epoch_ms=epoch,
            registry=registry, schema=EVENT_V2, **topics)
    load(spark, bootstrap, out, registry=registry, **topics)
    load(spark, bootstrap, out, registry=registry, **topics)
    return reconcile(spark, bootstrap, out, audit=audit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", nargs="?", choices=("demo", "produce", "load", "reconcile"), default="demo")
    parser.add_argument("--out", type=Path, required=True, help="where the ledger and the Parquet data live")
    BOOTSTRAP.add(parser)
    parser.add_argument("--embedded", action="store_true", help="start a broker of its own (in <out>/broker)")
    parser.add_argument("--lose", type=int, default=0, help="events the first producer counts but never sends")
    parser.add_argument("--windows", type=int, default=8, help=f"{WINDOW_MS // 60000}-minute windows to produce")
    parser.add_argument("--per-window", type=int, default=500, help="events per producer and window")
    parser.add_argument("--registry", help="a schema registry's URL: Avro events with schema ids")
    args = parser.parse_args(argv)
    if args.embedded:
        config = {"schema.registry.listeners": "http://127.0.0.1:0"}
        with EmbeddedBroker(args.out / "broker", config=config) as broker:
            args.registry = args.registry or broker.registry_urls[0]
            return _run(args, broker.bootstrap)
    return _run(args, args.bootstrap)


def _run(args, bootstrap: str) -> int:
    if args.step == "produce":
        sent = produce(bootstrap, windows=range(args.windows), per_window=args.per_window, lose=args.lose,
                       registry=args.registry)
        print(f"produce: {sent} events to {EVENTS}")
        return 0
    spark = local_session("mmlog-audit-pipeline")
    try:
        if args.step == "load":
            load(spark, bootstrap, args.out, registry=args.registry)
        elif args.step == "reconcile":
            reconcile(spark, bootstrap, args.out)
        else:
            demo(spark, bootstrap, args.out, lose=args.lose, windows=args.windows, per_window=args.per_window,
                 registry=args.registry)
    finally:
        stop_session(spark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
