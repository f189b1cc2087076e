"""The web console's cost at scale: each page's API answer time and the broker's CPU per view, the main
process's memory with the console on and off, and produce throughput with the console idle against off.

    python tools/bench_console.py [--partitions 10000] [--groups 1000] [--views 20] [--rounds 3]

Two standalone brokers (EmbeddedBroker, loopback, 2 processors each) hold the same data: `--partitions`
spread over topics of 100 partitions, `--groups` groups each with committed offsets on one topic's
partitions, a few records in every tenth partition, two schemas. One serves the console (and its
samplers), the other has it off. Against the first, each page's API calls are made `--views` times
one after another (an anonymous session, as a browser's): median and p99 answer time, and the
broker's CPU per view (utime+stime of the main process and its children, /proc, before and after).
Then `--rounds` interleaved rounds of producing 1 KiB records with acks=1 to each broker (console
idle: no session, its samplers running), and the main processes' resident memory after them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.client import Producer  # noqa: E402
from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.records import TopicPartition  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402

PER_TOPIC = 100
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})


def pages(groups: list[str], topic: str) -> dict[str, list[str]]:
    """Each page and the API calls its first view makes."""
    group = groups[len(groups) // 2]
    return {"cluster": ["/cluster"], "topics": ["/topics?size=50"], "topic": [f"/topics/{topic}"],
            "messages": [f"/messages/{topic}?partition=0&limit=50"],
            "groups": ["/groups?size=25"], "groups (search)": ["/groups?size=25&q=7"],
            "group": [f"/groups/{group}", f"/groups/{group}/lag"],
            "schemas": ["/schemas/subjects?size=25"], "schema": ["/schemas/subjects/orders-value/compare?left=1"],
            "security": ["/security/users", "/security/acls"], "metrics": ["/metrics/history"]}


class Browser:
    """An anonymous console session: its cookie, calls timed."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/").removesuffix("/console") + "/console/api"
        with urllib.request.urlopen(self.url + "/session", timeout=60) as reply:
            self.cookie = reply.headers["Set-Cookie"].split(";", 1)[0]

    def get(self, path: str) -> int:
        request = urllib.request.Request(self.url + path, headers={"Cookie": self.cookie})
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                reply.read()
                return reply.status
        except urllib.error.HTTPError as exc:
            return exc.code


def cpu_s(pid: int) -> float:
    """utime+stime of a process and its live children, in seconds."""
    total = 0
    for p in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total * TICK_S


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(broker: EmbeddedBroker, partitions: int, groups: int) -> tuple[list[str], list[str]]:
    """The topics, groups, records and schemas of the run (the same on both brokers)."""
    topics = [f"bench-{i:03d}" for i in range(-(-partitions // PER_TOPIC))]
    names = [f"group-{i:04d}" for i in range(groups)]
    with Admin(broker.bootstrap, timeout=300) as admin:
        for at in range(0, len(topics), 10):
            admin.create_topics({t: (min(PER_TOPIC, partitions - i * PER_TOPIC), {})
                                 for i, t in enumerate(topics) if at <= i < at + 10})
        producer = Producer(broker.bootstrap, acks=1, linger_ms=5)
        for topic in topics:
            for p in range(0, PER_TOPIC, 10):
                for _ in range(10):
                    producer.send(topic, value=b"r" * 100, partition=p)
        producer.flush(120)
        producer.close()
        for i, group in enumerate(names):
            topic = topics[i % len(topics)]
            admin.alter_group_offsets(group, {TopicPartition(topic, p): 1 + i % 5 for p in range(0, PER_TOPIC, 10)})
    if broker.registry_urls:
        for version in range(2):
            schema = SCHEMA if not version else SCHEMA.replace('"string"}', '"string"}, {"name": "note", '
                                                               '"type": "string", "default": ""}')
            request = urllib.request.Request(broker.registry_urls[0] + "/subjects/orders-value/versions",
                                             data=json.dumps({"schema": schema}).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=60).read()
    return topics, names


def view_pages(broker: EmbeddedBroker, topics: list[str], groups: list[str], views: int) -> list[tuple]:
    browser = Browser(broker.console_urls[0])
    rows = []
    for name, calls in pages(groups, topics[0]).items():
        statuses = {browser.get(path) for path in calls}  # warm: clients made, metadata fetched
        if statuses - {200}:
            rows.append((name, None, None, None, sorted(statuses)))
            continue
        times = []
        cpu0 = cpu_s(broker.pid)
        for _ in range(views):
            t = time.perf_counter()
            for path in calls:
                browser.get(path)
            times.append((time.perf_counter() - t) * 1000)
        cpu = (cpu_s(broker.pid) - cpu0) / views * 1000
        times.sort()
        rows.append((name, statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))], cpu, None))
    return rows


def produce_round(broker: EmbeddedBroker, topic: str, seconds: float) -> float:
    """MiB/s of 1 KiB records produced with acks=1 for `seconds`."""
    producer = Producer(broker.bootstrap, acks=1, linger_ms=5)
    value, sent = b"v" * 1024, 0
    end = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < end:
        for _ in range(1000):
            producer.send(topic, value=value)
        sent += 1000
    producer.flush(60)
    elapsed = time.perf_counter() - start
    producer.close()
    return sent * 1024 / elapsed / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--views", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="per produce round")
    args = parser.parse_args()
    common = {"group.initial.rebalance.delay.ms": 0, "num.partitions": 1}
    with tempfile.TemporaryDirectory() as scratch, \
            EmbeddedBroker(Path(scratch, "on"), processors=2, ready_timeout=300, config={
                **common, "console.listeners": "http://127.0.0.1:0",
                "schema.registry.listeners": "http://127.0.0.1:0"}) as on, \
            EmbeddedBroker(Path(scratch, "off"), processors=2, ready_timeout=300, config={
                **common, "schema.registry.listeners": "http://127.0.0.1:0"}) as off:
        started = time.perf_counter()
        topics, groups = fill(on, args.partitions, args.groups)
        fill(off, args.partitions, args.groups)
        print(f"filled both brokers in {time.perf_counter() - started:.0f} s: {args.partitions} partitions, "
              f"{len(topics)} topics, {args.groups} groups")
        rows = view_pages(on, topics, groups, args.views)
        print(f"\n{'page':18} {'median ms':>10} {'p99 ms':>8} {'broker CPU ms/view':>19}")
        for name, median, p99, cpu, failed in rows:
            if failed:
                print(f"{name:18} {'answered ' + ','.join(map(str, failed)):>39}")
            else:
                print(f"{name:18} {median:10.1f} {p99:8.1f} {cpu:19.1f}")
        rates: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(args.rounds):
            for label, broker in (("on", on), ("off", off)):
                rates[label].append(produce_round(broker, "bench-throughput", args.seconds))
        time.sleep(6)  # a sampler round after the load
        print(f"\n{'console':8} {'produce MiB/s (median)':>23} {'rounds':>28} {'main RSS MiB':>13}")
        for label, broker in (("on", on), ("off", off)):
            print(f"{label:8} {statistics.median(rates[label]):23.1f} "
                  f"{' '.join(f'{r:.1f}' for r in rates[label]):>28} {rss_mib(broker.pid):13.1f}")


if __name__ == "__main__":
    main()
