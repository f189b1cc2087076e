"""Curves, not points: mmlog's throughput, p99 latency and memory against the sizes that grow.

    python tools/bench_curves.py --quick                   # a few minutes; prints the tables, writes nothing
    python tools/bench_curves.py                           # the recorded run: PNGs in docs/bench/, its section
                                                           # of docs/benchmarks.md rewritten
    python tools/bench_curves.py --only partitions,memory  # some of the curves

Curves, each against brokers (EmbeddedBroker, loopback, data in a temporary
directory, log.flush.interval.ms=1000 as tools/bench) the run starts and stops:

* partitions: Produce throughput and p99 round trip against the partition count
  of the topic written (1 ... 10,000, every topic in one broker, 2 processors);
* connections: the same against producer connections (1 ... 1,000), one
  request in flight on each;
* retained: a consumer reading the oldest records of a partition while
  producers append to it, against the bytes the partition retains (1 GB,
  10 GB), its old data in the page cache (warm) and dropped from it (cold:
  fsync, then posix_fadvise DONTNEED on every segment file);
* processors: throughput against processor processes (1, 2, 4) and what one
  more costs in memory;
* memory: RSS and PSS (/proc/<pid>/smaps_rollup) of the main process and the
  processors against partitions and against idle connections, with the growth
  per partition and per connection from a least-squares line.

Producers are `tools/bench/mux_driver.py` processes (pre-encoded Produce requests,
many sockets a process, one selector loop), so 1,000 connections cost the client
little; the retained curve's consumer is mmlog's own Consumer (poll_batch, 1 MiB
fetches, tools/bench/mmlog_driver.py). Beside every throughput: the broker's CPU
(utime+stime of its processes, tools/bench/servers.py) per million records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_curves.py`: make `tools.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tools.bench.common import MESSAGE_SIZE, ClientProcess  # noqa: E402
from tools.bench.page import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CURVES = ("partitions", "connections", "retained", "processors", "memory")
RECORDED = dict(partitions=[1, 10, 100, 1000, 10_000], connections=[1, 10, 100, 1000], retained_gb=[1.0, 10.0],
                processors=[1, 2, 4], memory_partitions=[0, 2500, 5000, 10_000],
                memory_connections=[0, 250, 500, 1000], seconds=10.0, read_records=2_000_000)
QUICK = dict(partitions=[1, 10, 100, 1000], connections=[1, 10, 100, 1000], retained_gb=[0.25, 1.0],
             processors=[1, 2, 4], memory_partitions=[0, 500, 1000, 2000],
             memory_connections=[0, 250, 500, 1000], seconds=4.0, read_records=500_000)
BATCH = 50  # records a Produce request: the paper's batch
WARM_REQUESTS = 3  # requests to each partition before the partitions curve's clock starts
LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS = 16, 2, 2  # the steady load of the partitions, retained and processors curves
MiB = 1 << 20


@dataclass
class Point:
    """One point of a curve: `messages` records in `seconds`, costing the broker `cpu` seconds."""

    curve: str
    x: float
    series: str
    messages: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    p50: float | None = None
    p99: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_million(self) -> float:
        return self.cpu / self.messages * 1e6 if self.messages else 0.0


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# --- the broker and its load ------------------------------------------------------------------------------------

FLUSH_MS: int | None = 1000  # log.flush.interval.ms of every broker of the run (--flush-ms)


def broker(workdir: Path, name: str, processors: int = 2):
    from tools.bench import mmlog_driver

    return mmlog_driver.server(Path(workdir) / name, processors=processors, flush_ms=FLUSH_MS)


def broker_cpu(b) -> float:
    from tools.bench.servers import cpu_seconds, group_pids

    return cpu_seconds(group_pids(b.pid))


def admin(b):
    from mmlog.client.connection import BrokerConnection

    host, port = b.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=900)


def create_topic(b, name: str, partitions: int, config: dict | None = None) -> float:
    """Create a topic (one CreateTopics request); returns the seconds it took."""
    from mmlog.protocol.messages import create_topics

    started = time.monotonic()
    with admin(b) as conn:
        r = conn.request(create_topics.API_KEY, 4, create_topics.REQUEST(topics=[
            {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}], timeout_ms=900_000))
    t = r.topics[0]
    if t.error_code:
        raise RuntimeError(f"creating {name} ({partitions} partitions): error {t.error_code} {t.error_message}")
    return time.monotonic() - started


def grow_topic(b, name: str, count: int) -> float:
    from mmlog.protocol.messages import create_partitions

    started = time.monotonic()
    with admin(b) as conn:
        r = conn.request(create_partitions.API_KEY, 1, create_partitions.REQUEST(
            topics=[{"name": name, "count": count, "assignments": None}], timeout_ms=900_000, validate_only=False))
    if r.results[0].error_code:
        raise RuntimeError(f"growing {name} to {count}: error {r.results[0].error_code} {r.results[0].error_message}")
    return time.monotonic() - started


def metadata_seconds(b, name: str) -> float:
    """One Metadata request for the topic, answered: seconds."""
    from mmlog.protocol.messages import metadata

    with admin(b) as conn:
        started = time.monotonic()
        r = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": name}]))
        assert r.topics[0].error_code == 0, r.topics[0]
        return time.monotonic() - started


def load(b, topic: str, partitions: int, conns: int, window: int, procs: int, batch: int = BATCH,
         seconds: float | None = None, requests: int | None = None, during=None) -> Point:
    """Produce from `procs` mux client processes sharing `conns` connections; `during()` (if given) runs in
    this process once they are let go, and its return value lands in the point's `extra["during"]`."""
    from tools.bench import mux_driver

    procs = max(1, min(procs, conns))
    ctx = ClientProcess._ctx
    go, clients = ctx.Event(), []
    for i in range(procs):
        share = conns // procs + (i < conns % procs)
        each = None if requests is None else requests // procs + (i < requests % procs)
        ready = ctx.Event()
        clients.append((ClientProcess(mux_driver.produce, b.bootstrap, topic, partitions, share, window, batch,
                                      seconds, each, (i, procs), ready=ready, go=go), ready))
    for client, ready in clients:
        client.wait_for(ready, 300, "connections")
    before = broker_cpu(b)
    go.set()
    extra = {"during": during()} if during is not None else {}
    timeout = (seconds or 0) + 600 + (requests or 0) * 0.1  # first appends to 10,000 partitions: < 50 a second
    results = [client.result(timeout) for client, _ in clients]
    cpu = broker_cpu(b) - before
    lat = np.concatenate([r["latency_ms"] for r in results])
    p50, p99 = (np.percentile(lat, [50, 99]) if len(lat) else (None, None))
    return Point("", 0, "", sum(r["messages"] for r in results), max(r["seconds"] for r in results), cpu,
                 p50, p99, extra)


def _show(p: Point, what: str) -> None:
    lat = f", p50 {p.p50:.2f} ms, p99 {p.p99:.2f} ms" if p.p99 is not None else ""
    log(f"{p.curve} {what}: {p.rate:,.0f} msg/s{lat}, broker CPU {p.cpu_per_million:.2f} s per million records")


# --- the curves --------------------------------------------------------------------------------------------------

def curve_partitions(cfg, workdir: Path, points: list) -> None:
    with broker(workdir, "partitions") as b:
        for n in cfg["partitions"]:
            made = create_topic(b, f"p{n}", n)
            meta = metadata_seconds(b, f"p{n}")
            # three requests to every partition first, from the same connections: each processor has opened what
            # it can keep open (past its budget, reopening is the steady state measured), and every partition's
            # first index pages are touched (the first store into each costs milliseconds: a page fault and the
            # file system's page_mkwrite), so that the clock measures appends, not first appends
            first = load(b, f"p{n}", n, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, requests=WARM_REQUESTS * n)
            p = load(b, f"p{n}", n, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, seconds=cfg["seconds"])
            p.curve, p.x, p.series = "partitions", n, "produce"
            p.extra.update(create_s=made, metadata_ms=meta * 1000, fds=_fds(b), maps=_maps(b),
                           first_cpu_ms=first.cpu / (WARM_REQUESTS * n) * 1000)
            points.append(p)
            _show(p, f"{n:,} partitions (created in {made:.1f} s, Metadata {meta * 1000:.1f} ms)")
        started = time.monotonic()
        b.stop()
        stopped = time.monotonic()
        b.ready_timeout = 1800  # load() opens (and checks) every partition: minutes with 10,000
        b.start()
        ready = time.monotonic()
        total = sum(cfg["partitions"])
        p.extra["restart"] = (total, stopped - started, ready - stopped)
        log(f"partitions: a clean stop with {total:,} partitions took {stopped - started:.1f} s, the start "
            f"{ready - stopped:.1f} s")


def curve_connections(cfg, workdir: Path, points: list) -> None:
    with broker(workdir, "connections") as b:
        create_topic(b, "c", 16)
        for n in cfg["connections"]:
            p = load(b, "c", 16, n, 1, 1 if n < 10 else LOAD_PROCS, seconds=cfg["seconds"])
            p.curve, p.x, p.series = "connections", n, "produce"
            points.append(p)
            _show(p, f"{n:,} connections")


def curve_retained(cfg, workdir: Path, points: list) -> None:
    from tools.bench import mmlog_driver

    with broker(workdir, "retained") as b:
        create_topic(b, "r", 1)
        held = records = 0  # bytes and records the partition holds
        frame = BATCH * 10 * (MESSAGE_SIZE + 10) + 61  # bytes a batch of the filler's 500 records holds
        for gb in cfg["retained_gb"]:
            want = int(gb * 1e9) - held
            if want > 0:  # fill up to `gb` with big requests, few connections
                started = time.monotonic()
                f = load(b, "r", 1, 4, 4, 1, batch=BATCH * 10, requests=max(1, want // frame))
                held += f.messages * (MESSAGE_SIZE + 10)
                records += f.messages
                log(f"retained: filled to {held / 1e9:.2f} GB in {time.monotonic() - started:.0f} s")
            for cache in ("warm", "cold"):
                if cache == "cold":
                    dropped = drop_cache(b.data_dir / "r-0")
                    log(f"retained: dropped {dropped / 1e9:.2f} GB of r-0 from the page cache")

                def read(n=min(cfg["read_records"], records)):  # the oldest n records, all there before
                    c = ClientProcess(mmlog_driver.consume, b.bootstrap, "r", n, "bulk", MiB)
                    return c.result(120 + n / 20_000)

                p = load(b, "r", 1, 8, 1, 1, seconds=cfg["seconds"], during=read)
                got = p.extra.pop("during")
                p.curve, p.x, p.series = "retained", gb, f"produce ({cache})"
                c = Point("retained", gb, f"consume oldest ({cache})", got["messages"], got["seconds"], p.cpu)
                c.extra["cpu_shared"] = True
                points += [p, c]
                log(f"retained {gb:g} GB, {cache}: consumer {c.rate:,.0f} msg/s ({got['nbytes'] / got['seconds'] / 1e6:.0f}"
                    f" MB/s) while producers wrote {p.rate:,.0f} msg/s (p99 {p.p99:.2f} ms); broker CPU "
                    f"{p.cpu / (p.messages + c.messages) * 1e6:.2f} s per million records moved")
                held += p.messages * (MESSAGE_SIZE + 10)
                records += p.messages


def drop_cache(directory: Path) -> int:
    """fsync every segment file of a partition and ask the kernel to drop its pages; returns the bytes."""
    total = 0
    for path in sorted(directory.glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return total


def curve_processors(cfg, workdir: Path, points: list) -> None:
    from tools.bench_memory import process_memory

    for n in cfg["processors"]:
        with broker(workdir, f"processors-{n}", processors=n) as b:
            time.sleep(2)
            idle = {pid: process_memory(pid) for pid in [b.pid, *b.processor_pids()]}
            create_topic(b, "w", 16)
            p = load(b, "w", 16, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, seconds=cfg["seconds"])
            p.curve, p.x, p.series = "processors", n, "produce"
            p.extra.update(idle_rss=sum(r for r, _ in idle.values()), idle_pss=sum(s for _, s in idle.values()),
                           main_pss=idle[b.pid][1], processor_pss=[idle[q][1] for q in b.processor_pids()])
            points.append(p)
            _show(p, f"{n} processors (idle PSS {p.extra['idle_pss'] / MiB:.1f} MiB)")


def curve_memory(cfg, workdir: Path, points: list) -> None:
    from tools.bench_memory import open_idle

    with broker(workdir, "memory-partitions") as b:
        have = 0
        for n in cfg["memory_partitions"]:
            if n > have:
                (create_topic(b, "m", n) if have == 0 else grow_topic(b, "m", n))
                # one request to each partition, so that every processor opens (up to its budget) what it serves
                load(b, "m", n, 8, 4, 1, batch=1, requests=n)
                have = n
            points.append(_memory_point(b, "memory-partitions", n))
    with broker(workdir, "memory-connections") as b:
        socks: list = []
        for n in cfg["memory_connections"]:
            socks += open_idle(b, n - len(socks))
            points.append(_memory_point(b, "memory-connections", n))
        for s in socks:
            s.close()


def _memory_point(b, curve: str, x: int) -> Point:
    from tools.bench_memory import process_memory

    time.sleep(1.5)
    procs = b.processor_pids()
    main, each = process_memory(b.pid), [process_memory(pid) for pid in procs]
    p = Point(curve, x, "memory", extra=dict(main_rss=main[0], main_pss=main[1], proc_rss=sum(r for r, _ in each),
                                              proc_pss=sum(s for _, s in each), fds=_fds(b), maps=_maps(b)))
    log(f"{curve} {x:,}: main RSS {main[0] / MiB:.1f} MiB PSS {main[1] / MiB:.1f} MiB; processors RSS "
        f"{p.extra['proc_rss'] / MiB:.1f} MiB PSS {p.extra['proc_pss'] / MiB:.1f} MiB; descriptors {p.extra['fds']}, "
        f"mappings {p.extra['maps']} (main, processors)")
    return p


def _fds(b) -> list[int]:
    return [len(os.listdir(f"/proc/{pid}/fd")) for pid in [b.pid, *b.processor_pids()]]


def _maps(b) -> list[int]:
    out = []
    for pid in [b.pid, *b.processor_pids()]:
        with open(f"/proc/{pid}/maps", "rb") as f:
            out.append(sum(1 for _ in f))
    return out


def slope(xs, ys) -> float:
    """The least-squares growth of ys per unit of xs."""
    return float(np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)[0]) if len(xs) > 1 else 0.0


# --- the report -------------------------------------------------------------------------------------------------

CLIENTS = {"partitions": f"mux_driver: {LOAD_PROCS} processes, {LOAD_CONNS} connections, {LOAD_WINDOW} requests "
                         f"in flight each, {BATCH} records a request, requests spread over every partition, after "
                         f"{WARM_REQUESTS} requests to each partition",
           "connections": f"mux_driver: 1 process up to 9 connections, then {LOAD_PROCS}; 1 request in flight a "
                          f"connection, {BATCH} records a request, 16 partitions",
           "retained": f"consumer: mmlog Consumer.poll_batch(), 1 MiB fetches, from offset 0; producers: mux_driver, "
                       f"1 process, 8 connections, 1 request in flight each, {BATCH} records a request, "
                       "to the same partition",
           "processors": f"mux_driver: {LOAD_PROCS} processes, {LOAD_CONNS} connections, {LOAD_WINDOW} in flight "
                         f"each, {BATCH} records a request, 16 partitions"}


def tables(points: list[Point], cfg) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    tp = ["msg/s", "MB/s", "p50 ms", "p99 ms", "broker CPU s / M records"]

    def row(p: Point) -> list[str]:
        return [f"{p.rate:,.0f}", f"{p.rate * MESSAGE_SIZE / 1e6:.1f}", "-" if p.p50 is None else f"{p.p50:.2f}",
                "-" if p.p99 is None else f"{p.p99:.2f}",
                "(shared)" if p.extra.get("cpu_shared") else f"{p.cpu_per_million:.2f}"]

    pts = [p for p in points if p.curve == "partitions"]
    if pts:
        out.append(("Produce against partitions (one broker, 2 processors)",
                    ["partitions", *tp, f"first {WARM_REQUESTS} requests a partition: broker CPU ms a request",
                     "created in s", "Metadata ms", "descriptors (main, processors)"],
                    [[f"{p.x:,.0f}", *row(p), f"{p.extra['first_cpu_ms']:.2f}", f"{p.extra['create_s']:.1f}",
                      f"{p.extra['metadata_ms']:.1f}",
                      ", ".join(f"{x:,}" for x in p.extra["fds"])] for p in pts]))
    restart = next((p.extra["restart"] for p in pts if "restart" in p.extra), None)
    if restart:
        out.append(("Stopping and starting that broker", ["partitions in all", "clean stop s", "start to ready s"],
                    [[f"{restart[0]:,}", f"{restart[1]:.1f}", f"{restart[2]:.1f}"]]))
    pts = [p for p in points if p.curve == "connections"]
    if pts:
        out.append(("Produce against connections (2 processors)", ["connections", *tp],
                    [[f"{p.x:,.0f}", *row(p)] for p in pts]))
    pts = [p for p in points if p.curve == "retained"]
    if pts:
        body = []
        for p in pts:
            moved = p.cpu_per_million if not p.extra.get("cpu_shared") else None
            body.append([f"{p.x:g}", p.series, *row(p)[:4], "-" if moved is None else
                         f"{p.cpu / (p.messages + _pair(pts, p).messages) * 1e6:.2f}"])
        out.append(("Consumers of old data while producers write, against the bytes retained (one partition)",
                    ["GB retained", "who", *tp[:4], "broker CPU s / M records moved (both)"], body))
    pts = [p for p in points if p.curve == "processors"]
    if pts:
        out.append(("Produce against processors (2 cores)",
                    ["processors", *tp, "idle PSS MiB (all)", "main PSS MiB", "each processor's PSS MiB"],
                    [[f"{p.x:g}", *row(p), f"{p.extra['idle_pss'] / MiB:.1f}", f"{p.extra['main_pss'] / MiB:.1f}",
                      ", ".join(f"{x / MiB:.1f}" for x in p.extra["processor_pss"])] for p in pts]))
        if len(pts) > 1:
            per = slope([p.x for p in pts], [p.extra["idle_pss"] for p in pts])
            out.append(("One more processor", ["PSS per processor (least squares)"], [[f"{per / MiB:.1f} MiB"]]))
    for curve, unit in (("memory-partitions", "partition"), ("memory-connections", "connection")):
        pts = [p for p in points if p.curve == curve]
        if not pts:
            continue
        body = [[f"{p.x:,.0f}", f"{p.extra['main_rss'] / MiB:.1f}", f"{p.extra['main_pss'] / MiB:.1f}",
                 f"{p.extra['proc_rss'] / MiB:.1f}", f"{p.extra['proc_pss'] / MiB:.1f}",
                 ", ".join(f"{x:,}" for x in p.extra["fds"]), ", ".join(f"{x:,}" for x in p.extra["maps"])]
                for p in pts]
        xs = [p.x for p in pts]
        grow = [f"{slope(xs, [p.extra[k] for p in pts]) / 1024:.1f}" for k in ("main_rss", "main_pss", "proc_rss",
                                                                                "proc_pss")]
        body.append([f"per {unit}, KiB", *grow, "-", "-"])
        out.append((f"Memory against {unit}s (2 processors)",
                    [f"{unit}s", "main RSS MiB", "main PSS MiB", "processors' RSS MiB", "processors' PSS MiB",
                     "descriptors (main, processors)", "mappings (main, processors)"], body))
    return out


def _pair(pts: list[Point], p: Point) -> Point:
    """The retained curve's other point of the same size and cache state (producer <-> consumer)."""
    cache = p.series.rsplit("(", 1)[1]
    return next(q for q in pts if q.x == p.x and q is not p and q.series.endswith("(" + cache))


def text(tabs) -> str:
    lines = []
    for title, header, body in tabs:
        widths = [max(len(c) for c in col) for col in zip(header, *body)]
        lines += ["", title, "  ".join(h.rjust(w) for h, w in zip(header, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in body]
    return "\n".join(lines)


def markdown(tabs) -> str:
    lines = []
    for title, header, body in tabs:
        lines += [f"#### {title}", "", "| " + " | ".join(header) + " |",
                  "| " + " | ".join("---:" for _ in header) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in body] + [""]
    return "\n".join(lines)


def plots(points: list[Point], out: Path) -> list[Path]:
    """One PNG per curve under `out`; [] (and a line saying what to install) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        log("no figures: matplotlib is not installed (pip install -e '.[bench]' or pip install matplotlib)")
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        made.append(out / name)

    for curve, xlabel, logx in (("partitions", "partitions of the topic written", True),
                                ("connections", "producer connections", True),
                                ("retained", "GB retained in the partition", False),
                                ("processors", "processor processes", False)):
        pts = [p for p in points if p.curve == curve]
        if not pts:
            continue
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
        for series in dict.fromkeys(p.series for p in pts):
            s = [p for p in pts if p.series == series]
            a.plot([p.x for p in s], [p.rate for p in s], "o-", label=series)
            if s[0].p99 is not None:
                b.plot([p.x for p in s], [p.p99 for p in s], "o-", label=series)
        a.set(xlabel=xlabel, ylabel="records/s", title=f"throughput against {curve}")
        b.set(xlabel=xlabel, ylabel="p99 Produce round trip, ms", title="p99 latency")
        for ax in (a, b):
            if logx:
                ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        save(fig, f"curves-{curve}.png")
    mems = [(c, u) for c, u in (("memory-partitions", "partitions"), ("memory-connections", "idle connections"))
            if any(p.curve == c for p in points)]
    if mems:
        fig, axes = plt.subplots(1, len(mems), figsize=(5 * len(mems), 3.8), squeeze=False)
        for ax, (curve, unit) in zip(axes[0], mems):
            pts = [p for p in points if p.curve == curve]
            for key, label in (("main_pss", "main PSS"), ("proc_pss", "processors' PSS"), ("main_rss", "main RSS"),
                               ("proc_rss", "processors' RSS")):
                ax.plot([p.x for p in pts], [p.extra[key] / MiB for p in pts], "o-", label=label)
            ax.set(xlabel=unit, ylabel="MiB", title=f"memory against {unit}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        save(fig, "curves-memory.png")
    return made


# --- the command ------------------------------------------------------------------------------------------------

def parse(argv):
    p = argparse.ArgumentParser(prog="python tools/bench_curves.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes and shorter loads; writes nothing")
    p.add_argument("--only", default=",".join(CURVES), help=f"comma-separated, of {', '.join(CURVES)}")
    p.add_argument("--seconds", type=float, help="seconds of load per point (default 10, quick 4)")
    p.add_argument("--retained-gb", help="comma-separated sizes of the retained curve (default 1,10)")
    p.add_argument("--flush-ms", default="1000", help="the brokers' log.flush.interval.ms (default 1000, as "
                   "tools/bench: an fsync a second); 'none' for the broker's default, no time-based fsync")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "bench", help="where the PNGs go")
    p.add_argument("--markdown", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--record", action=argparse.BooleanOptionalAction, default=None,
                   help="write the PNGs and the page's section (default: yes, but not with --quick)")
    a = p.parse_args(argv)
    cfg = dict(QUICK if a.quick else RECORDED)
    if a.seconds is not None:
        cfg["seconds"] = a.seconds
    if a.retained_gb:
        cfg["retained_gb"] = [float(x) for x in a.retained_gb.split(",")]
    global FLUSH_MS
    FLUSH_MS = None if a.flush_ms == "none" else int(a.flush_ms)
    only = [c.strip() for c in a.only.split(",") if c.strip()]
    if not only or any(c not in CURVES for c in only):
        p.error(f"--only: choose among {', '.join(CURVES)}")
    return cfg, only, a, (not a.quick) if a.record is None else a.record


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through every broker's stop()


def main(argv=None) -> int:
    cfg, only, args, record = parse(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    command = ("python tools/bench_curves.py " + " ".join(sys.argv[1:] if argv is None else argv)).strip()
    if record:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            log("matplotlib is missing for the figures: pip install -e '.[bench]' (or pip install matplotlib)")
            return 2
    workdir = Path(tempfile.mkdtemp(prefix="mmlog-bench-curves-"))
    started, points, failed = time.monotonic(), [], []
    load_start = os.getloadavg()
    log(f"{command}: curves {', '.join(only)}; data in {workdir}")
    steps = {"partitions": curve_partitions, "connections": curve_connections, "retained": curve_retained,
             "processors": curve_processors, "memory": curve_memory}
    try:
        for name in only:
            log(f"{name}: starting")
            try:
                steps[name](cfg, workdir, points)
            except Exception:  # noqa: BLE001 - the other curves still run; the failure is reported
                import traceback

                log(f"{name}: FAILED\n{traceback.format_exc()}")
                failed.append(name)
            shutil.rmtree(workdir / name, ignore_errors=True)
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc or 'SIGINT'}): every broker stopped, nothing written")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    tabs = tables(points, cfg)
    print(text(tabs))
    if record:
        made = plots(points, args.out)
        import subprocess

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        rel = os.path.relpath(args.out, args.markdown.parent)
        clients = [f"- {c}: {CLIENTS[c]}" for c in only if c in CLIENTS]
        section = "\n".join([
            f"Run of {time.strftime('%Y-%m-%d %H:%M %Z')}, {minutes:.1f} minutes: `{command}`"
            + (f"; FAILED: {', '.join(failed)}" if failed else "") + ".", "",
            f"- mmlog {commit or '?'}, Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
            f"{' '.join(f'{x:.2f}' for x in load_start)} at start, "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at end; {cfg['seconds']:g} s of load a point; "
            + ("no time-based fsync" if FLUSH_MS is None else f"log.flush.interval.ms={FLUSH_MS}"),
            *clients, "", markdown(tabs), *[f"![{m.stem}]({rel}/{m.name})" for m in made], ""])
        page = args.markdown
        write_section(page, "bench_curves", section)
        log(f"wrote {page} and {len(made)} figures in {args.out}")
    log(f"done in {minutes:.1f} min" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
