"""mmlog beside the log-structured peers a Kafka user would pick instead, in one run.

    python tools/bench_peers.py --quick      # a few minutes; prints the tables, writes nothing
    python tools/bench_peers.py              # the recorded run: also rewrites its section of docs/benchmarks.md
    python tools/bench_peers.py --paired 60 --slice 200                 # batch 1, the servers taking turns
    python tools/bench_peers.py --paired-latency 20 --latency-rate 5000  # end-to-end latency, the systems in turn

Systems, each server started by the run on free loopback ports in a temporary
directory and stopped (by pid, its process group) when its rows are done:
mmlog (an EmbeddedBroker, 2 processors) through its own client and through
confluent-kafka (librdkafka); Redis Streams (redis-server, appendfsync
everysec, redis-py); RabbitMQ Streams (rabbitmq-server with the rabbitmq_stream
plugin, rstream); NATS JetStream (nats-server -js, file storage, nats-py). A peer
whose server or client is missing is skipped with a one-line message. With
--paired-latency, two more may be named: `frames`, mmlog through bare Kafka
frames on blocking sockets (tools/bench/frames_driver.py: the broker's share
without a client library), and `relay`, the host's floor (tools/bench/relay.py:
a relay that passes bytes on, with raw-socket clients).

Rows, the same 200-byte records and counts for every system: produce batch 1
(each record's acknowledgement awaited before the next), produce batch 50
(pipelined as each client allows), consume (a prefilled stream read from its
start: the batch-50 one) and end-to-end latency (p50/p99 at a fixed rate). Beside
each throughput: the server's CPU (utime+stime of its processes, /proc/<pid>/stat,
read just before the client is let go and just after it ends) per million
records and per request, and mmlog's ratio to the row (its own client's row).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_peers.py`: make `tools.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.bench.common import MESSAGE_SIZE, ClientFailed, ClientProcess  # noqa: E402
from tools.bench.page import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("mmlog", "librdkafka", "redis", "rabbitmq-streams", "nats")
# asked for by name, in --paired-latency runs only: mmlog through bare Kafka frames (tools/bench/frames_driver.py,
# the broker's share without a client library) and the host's floor (tools/bench/relay.py)
LATENCY_ONLY = ("frames", "relay")
# system -> (label in the tables, client)
LABELS = {"mmlog": ("mmlog", "mmlog client"), "librdkafka": ("mmlog", "confluent-kafka (librdkafka)"),
          "redis": ("Redis Streams", "redis-py"), "rabbitmq-streams": ("RabbitMQ Streams", "rstream"),
          "nats": ("NATS JetStream", "nats-py"), "frames": ("mmlog", "bare Kafka frames"),
          "relay": ("the host's floor: a relay", "raw sockets")}
TESTS = (("produce1", "Produce, batch 1 (each awaited)"), ("produce50", "Produce, batch 50 (pipelined)"),
         ("consume", "Consume from the start of a prefilled stream"))
RECORDED = dict(messages=1_000_000, batch1_messages=20_000, latency_seconds=10.0)
QUICK = dict(messages=100_000, batch1_messages=2_000, latency_seconds=3.0)
# a rate every client here sustains on 2 shared cores (nats-py's producer, awaiting each tick's acks, fell behind
# at 10,000/s), so that the latency is the systems', not a client's backlog
LATENCY_RATE = 2_000
IDLE_SECONDS = 3.0  # how long each server's idle CPU is measured, once it is up and before the first row
SECTION = "bench_peers"  # its markers in docs/benchmarks.md (tools/bench/page.py)
PAIRED_SECTION = "bench_peers_paired"
PAIRED_LATENCY_SECTION = "bench_peers_paired_latency"
PAIRED_LATENCY_SECONDS = 2.0  # a window of --paired-latency, unless --latency-seconds says otherwise
PAIRED_WARM = 200  # awaited sends to each server before the first slice


@dataclass
class Row:
    """One client run: `messages` records in `seconds`, costing the server `cpu` seconds."""

    system: str  # a key of LABELS
    test: str  # a key of TESTS
    batch: int | None  # records a request (producer rows); None for the consumer
    messages: int
    seconds: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_million(self) -> float:
        """Server CPU seconds per million records."""
        return self.cpu / self.messages * 1e6 if self.messages else 0.0

    @property
    def cpu_per_request_us(self) -> float | None:
        """Server CPU µs per request (producer rows: `batch` records a request)."""
        return self.cpu / (self.messages / self.batch) * 1e6 if self.batch else None


@dataclass
class Config:
    messages: int
    batch1_messages: int
    latency_rate: float
    latency_seconds: float
    systems: list[str]
    paired: int | None = None  # --paired ROUNDS
    paired_latency: int | None = None  # --paired-latency ROUNDS
    slice: int = 200

    def timeout(self, messages: int) -> float:
        return 120 + messages / 200


def missing(system: str) -> str | None:
    """Why `system` cannot run here (a one-line message), or None."""
    from tools.bench.servers import DEBIAN, PYTHON, _present

    need = {"librdkafka": "confluent", "mmlog": None}.get(system, system)
    if need in DEBIAN and not all(map(_present, DEBIAN[need][0])):
        return f"skipping {system}: its server is not installed (apt-get install -y {' '.join(DEBIAN[need][1])})"
    lost = [m for m in PYTHON.get(need, []) if importlib.util.find_spec(m) is None]
    if lost:
        return f"skipping {system}: its client is not installed (pip install {' '.join(lost)})"
    return None


class Bench:
    """Runs client processes against one server and keeps the rows and latencies."""

    def __init__(self, cfg: Config, log) -> None:
        self.cfg, self.log = cfg, log
        self.rows: list[Row] = []
        self.latencies: dict[str, object] = {}
        self.idle: dict[str, float] = {}  # server label -> CPU ms a second while no client runs

    def measure_idle(self, label: str, cpu, seconds: float = IDLE_SECONDS) -> None:
        """The server's CPU while idle (timers, schedulers' spinning): what every row's CPU includes too, and what
        weighs on a slow row's per-request cost."""
        before = cpu()
        time.sleep(seconds)
        self.idle[label] = (cpu() - before) / seconds * 1000
        self.log(f"{label}: {self.idle[label]:.1f} ms of server CPU a second while idle")

    def run(self, system: str, test: str, cpu, fn, *args, batch: int | None = None, **kwargs) -> Row:
        """`fn(*args, ready=, go=, **kwargs)` in a client process; the server's `cpu()` read at go and at the end."""
        ctx = ClientProcess._ctx
        ready, go = ctx.Event(), ctx.Event()
        messages = args[2]
        client = ClientProcess(fn, *args, ready=ready, go=go, **kwargs)
        client.wait_for(ready, 120, "warm-up")
        before = cpu()
        go.set()
        result = client.result(self.cfg.timeout(messages))
        row = Row(system, test, batch, result["messages"], result["seconds"], cpu() - before)
        self.rows.append(row)
        self.log(f"{system} {test}: {row.messages:,} in {row.seconds:.1f} s: {row.rate:,.0f} msg/s, server CPU "
                 f"{row.cpu_per_million:.2f} s per million" + (f", {row.cpu_per_request_us:.1f} µs a request"
                                                                if row.batch else ""))
        return row


def bench_mmlog(bench: Bench, workdir: Path, systems: list[str]) -> None:
    """mmlog's rows, its own client and librdkafka, against one broker."""
    from tools.bench import kafka_driver, mmlog_driver
    from tools.bench.servers import cpu_seconds, group_pids

    with mmlog_driver.server(workdir) as broker:
        cpu = lambda: cpu_seconds(group_pids(broker.pid))  # noqa: E731 - the acceptor and its processors
        boot = broker.bootstrap
        bench.measure_idle("mmlog", cpu)
        if "mmlog" in systems:
            bench.run("mmlog", "produce1", cpu, mmlog_driver.produce_awaited, boot, "own-1", bench.cfg.batch1_messages,
                      batch=1)
            bench.run("mmlog", "produce50", cpu, mmlog_driver.produce, boot, "own-50", bench.cfg.messages, 50, batch=50)
            bench.run("mmlog", "consume", cpu, mmlog_driver.consume, boot, "own-50", bench.cfg.messages, "iter",
                      200_000)
            bench.latencies["mmlog"] = _latency(bench, "mmlog", "acks=1, linger 0; poll_batch() long poll",
                                                mmlog_driver, (boot, "own-latency"))
        if "librdkafka" in systems:
            _rows(bench, "librdkafka", cpu, kafka_driver, boot, "acks=1, linger 0; poll() long poll", prefix="rdk-")


def _latency(bench: Bench, system: str, variant: str, driver, args: tuple):
    from tools.bench import latency

    return latency.measure(system, variant, driver.latency_producer, driver.latency_consumer, args, bench.cfg,
                           bench.log)


def _rows(bench: Bench, system: str, cpu, driver, address, variant: str, prefix: str = "s",
          produce=None) -> None:
    """Batch 1, batch 50, consume (the batch-50 stream) and latency through a driver whose
    `produce(address, stream, n, batch, ready, go)` (or `produce`) and `consume(address, stream, n, ready=, go=)`
    take the same arguments."""
    cfg, produce = bench.cfg, produce or driver.produce
    for test, batch, n in (("produce1", 1, cfg.batch1_messages), ("produce50", 50, cfg.messages)):
        bench.run(system, test, cpu, produce, address, f"{prefix}{batch}", n, batch, batch=batch)
    bench.run(system, "consume", cpu, driver.consume, address, f"{prefix}50", cfg.messages)
    bench.latencies[system] = _latency(bench, system, variant, driver, (address, f"{prefix}latency"))


def bench_redis(bench: Bench, workdir: Path) -> None:
    from tools.bench import redis_driver
    from tools.bench.servers import RedisServer

    with RedisServer(workdir) as server:
        bench.measure_idle("Redis Streams", server.cpu_seconds)
        _rows(bench, "redis", server.cpu_seconds, redis_driver, server.address,
              "redis-py pipeline per tick; XREAD BLOCK", produce=redis_driver.produce_py)


def bench_rabbitmq_streams(bench: Bench, workdir: Path) -> None:
    from tools.bench import rstream_driver
    from tools.bench.servers import RabbitServer

    with RabbitServer(workdir, streams=True) as server:
        bench.measure_idle("RabbitMQ Streams", server.cpu_seconds)
        _rows(bench, "rabbitmq-streams", server.cpu_seconds, rstream_driver, ("127.0.0.1", server.stream_port),
              "send_batch() per tick; subscribe() from the first offset")


def bench_nats(bench: Bench, workdir: Path) -> None:
    from tools.bench import nats_driver
    from tools.bench.servers import NatsServer

    with NatsServer(workdir) as server:
        bench.measure_idle("NATS JetStream", server.cpu_seconds)
        _rows(bench, "nats", server.cpu_seconds, nats_driver, server.address,
              "publish_async() per tick, acks awaited; ordered push consumer")


# --- --paired: batch 1, the servers taking turns -----------------------------------------------------------------

def _servers(stack, systems: list[str], workdir: Path) -> list:
    """Every asked-for server started (stopped when `stack` closes), as tools/bench/paired.py Servers whose
    kind is the client the system is driven through."""
    from tools.bench import mmlog_driver
    from tools.bench.paired import Server
    from tools.bench.relay import RelayServer
    from tools.bench.servers import NatsServer, RabbitServer, RedisServer, group_pids

    servers = []
    if {"mmlog", "librdkafka", "frames"} & set(systems):
        broker = stack.enter_context(mmlog_driver.server(workdir))
        host, port = broker.bootstrap.rsplit(":", 1)
        pids = tuple(group_pids(broker.pid))
        for system, kind in (("librdkafka", "librdkafka"), ("mmlog", "mmlog"), ("frames", "frames")):
            if system in systems:
                servers.append(Server(" through ".join(LABELS[system]), host, int(port), pids, kind,
                                      stream=f"paired-{kind}"))
    for system, make, kind, where in (
            ("redis", lambda: RedisServer(workdir), "redis-py", lambda s: s.address),
            ("nats", lambda: NatsServer(workdir), "nats-py", lambda s: s.address),
            ("relay", lambda: RelayServer(workdir), "relay", lambda s: s.address),
            ("rabbitmq-streams", lambda: RabbitServer(workdir, streams=True), "rstream",
             lambda s: ("127.0.0.1", s.stream_port))):
        if system in systems:
            server = stack.enter_context(make())
            servers.append(Server(" through ".join(LABELS[system]), *where(server), tuple(server.pids()), kind,
                                  stream="paired"))
    return servers


def paired(systems: list[str], rounds: int, per_slice: int, command: str) -> str:
    """Every server up at once; one client process sends `per_slice` awaited records through each system's
    client in turn (tools/bench/paired.py), `rounds` times; the section's text."""
    from contextlib import ExitStack

    from tools.bench.paired import interleaved, table

    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mmlog-bench-peers-")))
        servers = _servers(stack, systems, workdir)
        log(f"--paired: {rounds} rounds of {per_slice} awaited records to each of {len(servers)} servers in turn")
        tallies = ClientProcess(interleaved, servers, rounds, per_slice, PAIRED_WARM).result(7200)
    lines = [f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}): every server up at once, one client process "
             f"sending through each system's client in turn, {per_slice:,} records each awaited before the next "
             f"(200 bytes; acks=1, linger 0 for the Kafka clients), {rounds} rounds, the order rotating; each "
             "server's CPU from its threads' schedstat (ns) around its own slices. Every server shares every "
             "minute of the run, so the ratios hold where the absolute figures move with the host.", ""]
    return "\n".join(lines + table(tallies, [t.name for t in tallies[1:]]) + [""])


def paired_latency(systems: list[str], rounds: int, rate: float, seconds: float, command: str) -> str:
    """Every server up at once; end-to-end latency windows of `seconds` at `rate` through each system's
    clients in turn (tools/bench/latency.taking_turns), `rounds` times; the section's text."""
    from contextlib import ExitStack

    from tools.bench.latency import taking_turns, turns_table
    from tools.bench.paired import driver

    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mmlog-bench-peers-")))
        servers = _servers(stack, systems, workdir)
        log(f"--paired-latency: {rounds} rounds of {seconds:g} s at {rate:,.0f} msg/s through each of "
            f"{len(servers)} systems in turn")
        turns = taking_turns([(s.name, *driver(s), s.stream) for s in servers], rounds, rate, seconds, log)
    lines = [f"`{command}` ({time.strftime('%Y-%m-%d %H:%M %Z')}): every server up at once; end-to-end latency "
             f"(send -> the consumer has it, the clients of the latency rows above) at {rate:,.0f} msg/s, "
             f"one system's producer and consumer at a time for {seconds:g} s, {rounds} rounds, the order "
             "rotating, a fresh stream each window. Every system shares every minute of the run, so the ratios "
             "hold where the absolute figures move with the host.", ""]
    return "\n".join(lines + turns_table(turns, rate) + [""])


# --- the report -------------------------------------------------------------------------------------------------

def ratio(mine: float | None, theirs: float | None) -> str:
    """"2.31x": how many times `mine` is `theirs` ("-" when either is missing or zero)."""
    if not mine or not theirs:
        return "-"
    return f"{mine / theirs:.2f}x"


def _pair(mine: tuple, theirs: float | None, invert: bool = False) -> str:
    """Both mmlog ratios of a row, "own / librdkafka": mmlog's figure over the row's (`invert`: the row's over
    mmlog's)."""
    return " / ".join(ratio(theirs, m) if invert else ratio(m, theirs) for m in mine)


def tables(rows: list[Row], latencies: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, body) of every table: one per test, and the latencies. Each peer's row carries mmlog's
    ratio to it twice, "own / librdkafka": mmlog through its own client, and through librdkafka, in the same
    run; for throughput mmlog's msg/s over the row's, for CPU and latency the row's over mmlog's (so above 1x
    is mmlog ahead, everywhere)."""
    out = []
    for test, title in TESTS:
        find = lambda system: next((r for r in rows if r.test == test and r.system == system), None)  # noqa: E731
        own, rdk = find("mmlog"), find("librdkafka")
        header = ["system", "client", "msg/s", "server CPU s / M records", "server CPU µs / request",
                  "mmlog x msg/s (own / librdkafka)", "their CPU / mmlog's (own / librdkafka)"]
        body = []
        for r in (r for r in rows if r.test == test):
            peer = r.system not in ("mmlog", "librdkafka")
            body.append([*LABELS[r.system], f"{r.rate:,.0f}", f"{r.cpu_per_million:.2f}",
                         "-" if r.cpu_per_request_us is None else f"{r.cpu_per_request_us:.1f}",
                         _pair((own and own.rate, rdk and rdk.rate), r.rate) if peer else "-",
                         _pair((own and own.cpu_per_million, rdk and rdk.cpu_per_million), r.cpu_per_million,
                               invert=True) if peer else "-"])
        if body:
            out.append((title, header, body))
    own, rdk = latencies.get("mmlog"), latencies.get("librdkafka")
    body = []
    for system, lat in latencies.items():
        if lat is None:
            body.append([*LABELS[system], "failed", "-", "-", "-", "-", "-"])
            continue
        peer = system not in ("mmlog", "librdkafka")
        body.append([*LABELS[system], f"{lat.achieved:,.0f}", f"{lat.p50:.2f}", f"{lat.p99:.2f}", f"{lat.p999:.2f}",
                     _pair((own and own.p50, rdk and rdk.p50), lat.p50, invert=True) if peer else "-",
                     _pair((own and own.p99, rdk and rdk.p99), lat.p99, invert=True) if peer else "-"])
    if body:
        out.append(("End-to-end latency", ["system", "client", "msg/s sent", "p50 ms", "p99 ms", "p99.9 ms",
                                           "their p50 / mmlog's (own / librdkafka)",
                                           "their p99 / mmlog's (own / librdkafka)"], body))
    return out


def text(tabs) -> str:
    """The tables as plain text (stdout)."""
    lines = []
    for title, header, body in tabs:
        widths = [max(len(c) for c in col) for col in zip(header, *body)]
        lines += ["", title, "  ".join(h.ljust(w) for h, w in zip(header, widths))]
        lines += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                  for row in body]
    return "\n".join(lines)


def markdown(tabs) -> str:
    lines = []
    for title, header, body in tabs:
        lines += [f"#### {title}", "", "| " + " | ".join(header) + " |",
                  "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(header))) + " |"]
        lines += ["| " + " | ".join(row) + " |" for row in body] + [""]
    return "\n".join(lines)


def versions(systems: list[str]) -> list[str]:
    """What the figures depend on, a line each."""
    import platform
    import subprocess

    from tools.bench.servers import NatsServer, RabbitServer, RedisServer

    def module(name: str) -> str:
        try:
            from importlib.metadata import version
            return version(name)
        except Exception:  # noqa: BLE001 - not installed
            return "not installed"

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    facts = [f"mmlog {commit.strip() or '?'} (EmbeddedBroker, 2 processors), Python {platform.python_version()}, "
             f"{os.cpu_count()} cores, load average at start " + " ".join(f"{x:.2f}" for x in os.getloadavg())]
    if "librdkafka" in systems:
        import confluent_kafka
        facts.append(f"confluent-kafka {module('confluent-kafka')}, librdkafka {confluent_kafka.libversion()[0]}")
    if "redis" in systems:
        facts.append(f"redis-server {RedisServer.version()}, redis-py {module('redis')}, hiredis {module('hiredis')}")
    if "rabbitmq-streams" in systems:
        facts.append(f"rabbitmq-server {RabbitServer.version()} (rabbitmq_stream plugin), rstream {module('rstream')}")
    if "nats" in systems:
        facts.append(f"nats-server {NatsServer.version()}, nats-py {module('nats-py')}")
    return facts


# --- the command ------------------------------------------------------------------------------------------------

def parse(argv):
    p = argparse.ArgumentParser(prog="python tools/bench_peers.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"{QUICK['messages']:,} records ({QUICK['batch1_messages']:,}"
                   f" at batch 1), {QUICK['latency_seconds']:g} s of latency; writes nothing")
    p.add_argument("--messages", type=int, help=f"records per batch-50 and consumer run (default "
                   f"{RECORDED['messages']:,})")
    p.add_argument("--batch1-messages", type=int, help=f"records per batch-1 run (default "
                   f"{RECORDED['batch1_messages']:,})")
    p.add_argument("--latency-rate", type=float, default=LATENCY_RATE,
                   help=f"latency test rate, msg/s (default {LATENCY_RATE:,})")
    p.add_argument("--latency-seconds", type=float, help="latency test length (default 10)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, of {', '.join(SYSTEMS)}; with --paired-latency also frames (mmlog through "
                        "bare Kafka frames) and relay (the host's floor: a relay that passes bytes on)")
    p.add_argument("--markdown", type=Path, default=ROOT / "docs" / "benchmarks.md",
                   help="the page whose bench_peers section the run rewrites (default docs/benchmarks.md)")
    p.add_argument("--record", action=argparse.BooleanOptionalAction, default=None,
                   help="rewrite the page's section (default: yes, but not with --quick)")
    p.add_argument("--paired", type=int, metavar="ROUNDS",
                   help="batch 1 only, the servers taking turns: ROUNDS rounds of --slice awaited records through "
                        "each system's client (its own section of the page)")
    p.add_argument("--slice", type=int, default=200, help="--paired: awaited records a server a round (default 200)")
    p.add_argument("--paired-latency", type=int, metavar="ROUNDS",
                   help="end-to-end latency only, the systems taking turns: ROUNDS rounds of a --latency-seconds "
                        f"window (default {PAIRED_LATENCY_SECONDS:g} s here) at --latency-rate through each system's "
                        "clients (its own section of the page)")
    a = p.parse_args(argv)
    sizes = QUICK if a.quick else RECORDED
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    if not systems or any(s not in (*SYSTEMS, *LATENCY_ONLY) for s in systems):
        p.error(f"--systems: choose among {', '.join(SYSTEMS)} (and {', '.join(LATENCY_ONLY)} with --paired-latency)")
    if set(LATENCY_ONLY) & set(systems) and a.paired_latency is None:
        p.error(f"--systems: {' and '.join(LATENCY_ONLY)} are end-to-end latency clients: --paired-latency only")
    given = lambda value, default: default if value is None else value  # noqa: E731 - 0 is given, and refused
    window = PAIRED_LATENCY_SECONDS if a.paired_latency is not None else sizes["latency_seconds"]
    cfg = Config(given(a.messages, sizes["messages"]), given(a.batch1_messages, sizes["batch1_messages"]),
                 a.latency_rate, given(a.latency_seconds, window), systems)
    if min(cfg.messages, cfg.batch1_messages, cfg.latency_rate, cfg.latency_seconds) <= 0:
        p.error("sizes and rates must be positive")
    if a.paired is not None and (a.paired < 4 or a.slice <= 0):
        p.error("--paired needs at least 4 rounds (the slice ratios are quartiles) and a positive --slice")
    if a.paired_latency is not None and a.paired_latency < 4:
        p.error("--paired-latency needs at least 4 rounds (the window ratios are quartiles)")
    if a.paired is not None and a.paired_latency is not None:
        p.error("--paired and --paired-latency are separate runs: choose one")
    cfg.paired, cfg.slice, cfg.paired_latency = a.paired, a.slice, a.paired_latency
    return cfg, a.markdown, (not a.quick) if a.record is None else a.record


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through every server's stop()


def main(argv=None) -> int:
    cfg, page, record = parse(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    command = "python tools/bench_peers.py " + " ".join(sys.argv[1:] if argv is None else argv)
    systems = []
    for s in cfg.systems:
        why = missing(s)
        if why:
            log(why)
        else:
            systems.append(s)
    if not systems:
        log("nothing to run: every system asked for was skipped")
        return 2
    facts = versions(systems)
    if cfg.paired or cfg.paired_latency:
        if cfg.paired:
            name, section = PAIRED_SECTION, paired(systems, cfg.paired, cfg.slice, command.strip())
        else:
            name, section = PAIRED_LATENCY_SECTION, paired_latency(systems, cfg.paired_latency, cfg.latency_rate,
                                                                   cfg.latency_seconds, command.strip())
        print(section)
        facts.append("load average at end " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        if record:
            write_section(page, name, "\n".join([section, *[f"- {f}" for f in facts], ""]))
            log(f"wrote {page}")
        return 0
    bench = Bench(cfg, log)
    workdir = Path(tempfile.mkdtemp(prefix="mmlog-bench-peers-"))
    failed, started = [], time.monotonic()
    log(f"{command.strip()}: {cfg.messages:,} records ({cfg.batch1_messages:,} at batch 1) of {MESSAGE_SIZE} bytes, "
        f"systems {', '.join(systems)}; data in {workdir}")
    steps = [("mmlog", lambda: bench_mmlog(bench, workdir, systems))] if {"mmlog", "librdkafka"} & set(systems) else []
    steps += [(s, fn) for s, fn in (("redis", lambda: bench_redis(bench, workdir)),
                                    ("rabbitmq-streams", lambda: bench_rabbitmq_streams(bench, workdir)),
                                    ("nats", lambda: bench_nats(bench, workdir))) if s in systems]
    try:
        for name, step in steps:
            log(f"{name}: starting its server")
            try:
                step()
            except (ClientFailed, RuntimeError, OSError, TimeoutError):
                log(f"{name}: FAILED\n{traceback.format_exc()}")
                failed.append(name)
    except KeyboardInterrupt as exc:
        log(f"interrupted ({exc or 'SIGINT'}): every server stopped, nothing written")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    tabs = tables(bench.rows, bench.latencies)
    print(text(tabs))
    facts.append("load average at end " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if bench.idle:
        facts.append(f"server CPU while idle ({IDLE_SECONDS:g} s before the first row), ms a second: "
                     + ", ".join(f"{label} {ms:.1f}" for label, ms in bench.idle.items()))
    if record:
        section = "\n".join([f"Run of {time.strftime('%Y-%m-%d %H:%M %Z')}, {minutes:.1f} minutes: `{command.strip()}`"
                             f" ({cfg.messages:,} records at batch 50 and consumed, {cfg.batch1_messages:,} at batch 1,"
                             f" latency at {cfg.latency_rate:,.0f} msg/s for {cfg.latency_seconds:g} s"
                             + (f"; FAILED: {', '.join(failed)}" if failed else "") + ").", "",
                             *[f"- {f}" for f in facts], "", markdown(tabs)])
        write_section(page, SECTION, section)
        log(f"wrote {page}")
    log(f"done in {minutes:.1f} min" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
