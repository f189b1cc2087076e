"""What replication and idempotence cost a producer: RF 1 acks=1, RF 3 acks=1, RF 3 acks=all, RF 3 acks=all idempotent.

    python tools/bench_replication.py [--records N] [--rounds R] [--batch B] [--size BYTES]
                                      [--partitions P] [--processors N] [--cases a,b] [--record]

Three brokers (EmbeddedBroker, loopback, N processors each plus the replica
fetcher) on one ZooKeeper, all on this machine. Per round and case (the cases
interleaved, so a noisy machine treats them alike): librdkafka (confluent-kafka)
sends N records of BYTES bytes to a fresh topic of P partitions, in batches of B
(`batch.num.messages`, linger 5 ms; the records go to the partitions in runs of
B, so each batch fills), and waits for every delivery report.

Prints, per case, the median msg/s over the rounds, the p50/p99 of the produce
latency (send to delivery report) of the median round, each case's throughput as
a ratio to RF 1 acks=1 measured in the same run, and the CPU seconds per million
records (medians over the rounds) of the three brokers (utime+stime of every
process of each broker, /proc/<pid>/stat, read just before and after the case:
steadier than the throughput on a shared machine), split into their processors,
their replica fetchers and their main processes, and of the client (this
process: librdkafka's threads and the Python loop that feeds it), which shares
the machine's cores with them. `--record` rewrites the section of
docs/benchmarks.md between this tool's markers with the tables.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import confluent_kafka
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.cluster import Cluster  # noqa: E402
from mmlog.client.producer import Producer  # noqa: E402
from mmlog.testing import EmbeddedBroker, ZooKeeperServer  # noqa: E402
from tools.bench.common import free_port  # noqa: E402
from tools.bench.page import write_section  # noqa: E402
from tools.bench.servers import CLOCK_TICKS, _stat, cpu_seconds  # noqa: E402

CASES = [("RF 1 acks=1", 1, "1", False), ("RF 3 acks=1", 3, "1", False), ("RF 3 acks=all", 3, "all", False),
         ("mmlog idem off", 3, "all", False), ("mmlog idem on", 3, "all", True)]
SAMPLE = 100  # one record in SAMPLE is timed from produce() to its delivery report
KINDS = ("processors", "fetchers", "main")  # where a broker's CPU goes, per process kind
PY_SPY = str(Path(sys.executable).with_name("py-spy"))  # the venv's
BASELINE = " (baseline)"  # the suffix of a --baseline tree's rows


def leaders(bootstrap: str, topic: str) -> list[int] | None:
    """Each partition's leader, or None while some partition has no leader or a short ISR."""
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([topic], allow_auto_create=False)
    info = meta.topics[topic]
    if not info.leaders or any(len(isr) != len(replicas) or lead < 0
                               for lead, isr, replicas in zip(info.leaders, info.isr, info.replicas)):
        return None
    return list(info.leaders)


def make_topic(brokers, name: str, factor: int, partitions: int = 1) -> list[int]:
    """Create the topic and wait until every partition has a leader and a full ISR; its leaders."""
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(name, partitions, replication_factor=factor)
    deadline = time.monotonic() + 30
    while (lead := leaders(brokers[0].bootstrap, name)) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no leader with a full ISR after 30 s")
        time.sleep(0.1)
    return lead


def broker_cpu(brokers) -> dict[str, float]:
    """CPU seconds so far of the brokers' processes, by kind (KINDS), and the kernel's part of them ("sys")."""
    fetchers = [p for b in brokers if (p := b.fetcher_pid()) is not None]
    processors = [p for b in brokers for p in b.processor_pids() if p != b.cleaner_pid()]
    mains = [b.pid for b in brokers]
    return {"processors": cpu_seconds(processors), "fetchers": cpu_seconds(fetchers), "main": cpu_seconds(mains),
            "sys": kernel_seconds(processors + fetchers + mains)}


def kernel_seconds(pids: list[int]) -> float:
    """stime (field 15 of /proc/<pid>/stat) of `pids`, in seconds: the kernel's part (sockets, sendfile, pwrite)."""
    ticks = 0
    for pid in pids:
        if (fields := _stat(pid)) is not None:
            ticks += int(fields[12])
    return ticks / CLOCK_TICKS


def requests(brokers) -> dict[str, int]:
    """Produce and Fetch requests the brokers have answered so far (their metrics endpoints; every
    Fetch here is a follower's)."""
    counts = {"Produce": 0, "Fetch": 0}
    for b in brokers:
        with urllib.request.urlopen(f"http://127.0.0.1:{b.config['metrics.listen']}/metrics", timeout=10) as page:
            for line in page.read().decode().splitlines():
                for api in counts:
                    if line.startswith(f'kafka_network_requestmetrics_requests_total{{request="{api}"}}'):
                        counts[api] += int(float(line.rsplit(" ", 1)[1]))
    return counts


class Run:
    """One case of one round: msg/s, latencies (ms), and CPU seconds per million records by whom."""

    def __init__(self, rate: float, latencies: np.ndarray, cpu: dict[str, float]) -> None:
        self.rate, self.latencies, self.cpu = rate, latencies, cpu


def measured(brokers, records: int, body) -> Run:
    """Run body() -> (msg/s, latencies) with the brokers' and this process's CPU read around it."""
    asked = requests(brokers)
    before, client = broker_cpu(brokers), time.process_time()
    rate, latencies = body()
    client = time.process_time() - client
    after = broker_cpu(brokers)
    asked = {api: count - asked[api] for api, count in requests(brokers).items()}
    per_million = 1e6 / records
    cpu = {kind: (after[kind] - before[kind]) * per_million for kind in (*KINDS, "sys")}
    cpu["brokers"] = sum(cpu[kind] for kind in KINDS)
    cpu["client"] = client * per_million
    cpu["records/produce"] = records / max(asked["Produce"], 1)
    cpu["records/fetch"] = records / max(asked["Fetch"], 1)
    return Run(rate, latencies, cpu)


def produce(bootstrap: str, topic: str, n: int, size: int, batch: int, acks: str, idempotent: bool,
            partitions: int) -> tuple[float, np.ndarray]:
    """(msg/s, latencies in ms) of n records through librdkafka, to the partitions in runs of `batch`.

    One record in SAMPLE carries a delivery callback that times it (a Python call per record would
    cost the client more than the brokers spend on it); that no record failed is checked
    afterwards from the partitions' log end offsets, which must add up to n."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": batch,
        "queue.buffering.max.messages": 1_000_000, "enable.idempotence": idempotent})
    value = b"x" * size
    sampled = range(0, n, SAMPLE)
    sent = np.zeros(len(sampled))
    done = np.zeros(len(sampled))
    failures = []

    def timed(j):
        def delivered(err, msg):
            done[j] = time.perf_counter()
            if err is not None:
                failures.append(err)
        return delivered

    start = time.perf_counter()
    send = producer.produce
    for run in range(0, n, batch):
        partition = (run // batch) % partitions
        for i in range(run, min(run + batch, n)):
            while True:
                try:
                    if i % SAMPLE:
                        send(topic, value, partition=partition)
                    else:
                        sent[i // SAMPLE] = time.perf_counter()
                        send(topic, value, partition=partition, on_delivery=timed(i // SAMPLE))
                    break
                except BufferError:
                    producer.poll(0.001)
        if run % 1000 < batch:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit(f"{len(producer)} records still undelivered after 120 s")
    elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{len(failures)} deliveries failed: {failures[0]}")
    return n / elapsed, (done - sent) * 1000


def check_count(bootstrap: str, topic: str, n: int) -> None:
    """Every record of the run is in the topic, once: the partitions' high watermarks (what ListOffsets
    answers for the latest offset) add up to n, once the followers have them (acks=1 does not wait)."""
    deadline = time.monotonic() + 30
    with Admin(bootstrap) as admin:
        while (total := sum(admin.latest_offsets(topic).values())) < n and time.monotonic() < deadline:
            time.sleep(0.1)
    if total != n:
        raise SystemExit(f"{topic}: the partitions' high watermarks add up to {total}, not {n}")


def produce_mmlog(bootstrap: str, topic: str, n: int, size: int, batch: int, idempotent: bool,
                  partitions: int = 1) -> tuple:
    """(msg/s, no latencies) of n records through mmlog's Producer, acks=all, 5 requests in flight."""
    value = b"x" * size
    start = time.perf_counter()
    with Producer(bootstrap, acks="all", enable_idempotence=idempotent, linger_ms=5, max_batch_records=batch,
                  max_in_flight=5) as producer:
        futures = []
        for i in range(n):
            future = producer.send(topic, value, partition=(i // batch) % partitions)
            if i % batch == batch - 1 or i == n - 1:
                futures.append(future)
        for future in futures[-partitions:]:
            future.result(120)
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


def profiled(brokers, args, bootstrap: str, case: str, factor: int, acks: str) -> None:
    """One librdkafka run of the case with py-spy sampling every processor and fetcher of the brokers
    (raw collapsed stacks, summarised by tools/bench/profile.py) into args.profile/<case>/."""
    from tools.bench.profile import summarize

    out = args.profile / case.replace(" ", "-").replace("=", "")
    out.mkdir(parents=True, exist_ok=True)
    topic = "profiled-" + out.name
    lead = make_topic(brokers, topic, factor, args.partitions)
    roles = []
    for b in brokers:
        lead_here = "leader" if b.broker_id in lead else "follower"
        roles += [(f"broker{b.broker_id}-{lead_here}-processor-{pid}", pid) for pid in b.processor_pids()
                  if pid != b.cleaner_pid()]
        roles.append((f"broker{b.broker_id}-{lead_here}-fetcher", b.fetcher_pid()))
    spies = []
    for role, pid in roles:
        path = out / f"{role}.txt"
        # the fetcher's threads block in recv with the GIL released, which py-spy may count as running:
        # only its samples holding the GIL are its Python work
        gil = ["--gil"] if role.endswith("fetcher") else []
        spies.append((path, subprocess.Popen(
            [PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--nonblocking", "--rate", "200",
             "--threads", *gil, "--output", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)))
    time.sleep(1)
    run = measured(brokers, args.records, lambda: produce(bootstrap, topic, args.records, args.size, args.batch,
                                                          acks, False, args.partitions))
    for _, spy in spies:
        spy.send_signal(signal.SIGINT)
    for path, spy in spies:
        spy.wait(60)
        if path.exists():
            path.with_suffix(".summary.txt").write_text(summarize(path, top=25))
    print(f"profiled {case}: {run.rate:,.0f} msg/s under py-spy; profiles in {out}", flush=True)


def table(args, results: dict[str, list[Run]], round_trips: dict) -> tuple[list[str], list[str]]:
    """(plain lines, markdown lines) of the results."""
    def base_of(name: str) -> float | None:
        """The median RF 1 acks=1 rate of the same version (tree) as the row's."""
        runs = results.get(CASES[0][0] + (BASELINE if name.endswith(BASELINE) else ""))
        return statistics.median(r.rate for r in runs) if runs else None

    head = ["case", "msg/s", "MB/s", "p50 ms", "p99 ms", "vs RF 1", "brokers CPU s/M", "processors", "fetchers",
            "main", "of which sys", "client CPU s/M", "records/produce", "records/fetch"]
    rows = []
    for name, runs in results.items():
        base = base_of(name)
        rate = statistics.median(r.rate for r in runs)
        lat = sorted(runs, key=lambda r: r.rate)[len(runs) // 2].latencies  # the median round's
        p50, p99 = (f"{np.percentile(lat, q):.1f}" for q in (50, 99)) if len(lat) else ("-", "-")
        cpu = {k: statistics.median(r.cpu[k] for r in runs) for k in runs[0].cpu}
        rows.append([name, f"{rate:,.0f}", f"{rate * args.size / 1e6:.1f}", p50, p99,
                     f"{rate / base:.2f}" if base else "-", f"{cpu['brokers']:.2f}",
                     *(f"{cpu[k]:.2f}" for k in (*KINDS, "sys")), f"{cpu['client']:.2f}",
                     f"{cpu['records/produce']:.0f}",
                     f"{cpu['records/fetch']:.0f}" if cpu["records/fetch"] < args.records else "-"])
    widths = [max(len(c) for c in col) for col in zip(head, *rows)]
    plain = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [head, *rows]]
    md = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    for factor, lat in round_trips.items():
        line = (f"one acks=all batch of {args.batch} at a time, RF {factor}: p50 {np.percentile(lat, 50):.2f} ms, "
                f"p99 {np.percentile(lat, 99):.2f} ms")
        plain.append(line)
        md += ["", line]
    if "mmlog idem off" in results and "mmlog idem on" in results:
        plain_rate = statistics.median(r.rate for r in results["mmlog idem off"])
        fenced = statistics.median(r.rate for r in results["mmlog idem on"])
        line = f"idempotence on / off (mmlog's Producer, RF 3 acks=all): {fenced / plain_rate:.2f}"
        plain.append(line)
        md += ["", line]
    return plain, md


def start_cluster(zk, work: Path, args, source: Path | None) -> list:
    """Three brokers on `zk` (a chroot of their own), running this tree's mmlog or, with `source`, that
    tree's (their `python -m mmlog` finds it first: started from there, with it on PYTHONPATH)."""
    chroot = "/bench-" + work.name
    brokers = [EmbeddedBroker(work / f"broker-{i}", processors=args.processors, config={
        "zookeeper.connect": zk.connect + chroot, "broker.id": i, "auto.leader.rebalance.enable": False,
        "metrics.listen": free_port(),
    }, ready_timeout=180) for i in range(3)]
    here, path = os.getcwd(), os.environ.get("PYTHONPATH")
    try:
        if source is not None:
            os.chdir(source)
            os.environ["PYTHONPATH"] = str(source)
        for b in brokers:
            b.start()
    finally:
        os.chdir(here)
        if path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = path
    time.sleep(2)
    return brokers


def one_case(brokers, args, topic: str, factor: int, acks: str, idempotent: bool, name: str) -> Run:
    """A fresh topic and one measured run of the case on it."""
    bootstrap = ",".join(b.bootstrap for b in brokers)
    make_topic(brokers, topic, factor, args.partitions)
    if name.startswith("mmlog"):
        def body():
            return produce_mmlog(bootstrap, topic, args.records, args.size, args.batch, idempotent, args.partitions)
    else:
        def body():
            return produce(bootstrap, topic, args.records, args.size, args.batch, acks, idempotent, args.partitions)
    run = measured(brokers, args.records, body)
    check_count(bootstrap, topic, args.records)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python tools/bench_replication.py", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=1, help="partitions per topic (leaders spread by the "
                        "controller over the brokers)")
    parser.add_argument("--processors", type=int, default=1, help="processors per broker")
    parser.add_argument("--cases", default=",".join(name for name, *_ in CASES),
                        help="comma-separated, of: " + ", ".join(name for name, *_ in CASES))
    parser.add_argument("--awaited", type=int, default=200, help="batches sent one at a time, per factor")
    parser.add_argument("--profile", type=Path, help="after the rounds, one more run of each librdkafka case (not "
                        "in the figures) under py-spy, every broker process sampled; raw profiles and summaries go "
                        "here")
    parser.add_argument("--baseline", type=Path, help="an mmlog source tree (e.g. `git archive` of an older commit) "
                        "whose brokers run beside this tree's, on the same ZooKeeper, every case alternating between "
                        "the two; its rows are marked " + BASELINE.strip())
    parser.add_argument("--record", action="store_true", help="rewrite this tool's section of docs/benchmarks.md "
                        "(one per partition count: `bench_replication partitions-P`)")
    args = parser.parse_args()
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    cases = [c for c in CASES if c[0] in wanted]
    if len(cases) != len(wanted):
        raise SystemExit(f"unknown case in {args.cases!r}; the cases: {', '.join(n for n, *_ in CASES)}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    versions = [("", None)] + ([(BASELINE, args.baseline.resolve())] if args.baseline else [])
    with ZooKeeperServer(work / "zk") as zk:
        clusters = {}
        try:
            for label, source in versions:
                clusters[label] = start_cluster(zk, work / ("baseline" if label else "new"), args, source)
            for brokers in clusters.values():
                bootstrap = ",".join(b.bootstrap for b in brokers)
                make_topic(brokers, "warm-up", 1)  # numba compiles the client's kernels here, not in a timed case
                for idempotent in (False, True):
                    produce_mmlog(bootstrap, "warm-up", 5000, args.size, args.batch, idempotent)
            results: dict[str, list[Run]] = {name + label: [] for name, *_ in cases for label, _ in versions}
            for r in range(args.rounds):
                for c, (name, factor, acks, idempotent) in enumerate(cases):
                    order = list(clusters.items())
                    for label, brokers in order if r % 2 == 0 else order[::-1]:  # each version goes first in turn
                        run = one_case(brokers, args, f"bench-{r}-{c}", factor, acks, idempotent, name)
                        results[name + label].append(run)
                        print(f"round {r + 1} {name + label}: {run.rate:,.0f} msg/s, brokers {run.cpu['brokers']:.2f} "
                              f"CPU s/M ({', '.join(f'{k} {run.cpu[k]:.2f}' for k in (*KINDS, 'sys'))}), client "
                              f"{run.cpu['client']:.2f}; records per produce {run.cpu['records/produce']:.0f}, "
                              f"per fetch {run.cpu['records/fetch']:.0f}", flush=True)
            brokers = clusters[""]
            bootstrap = ",".join(b.bootstrap for b in brokers)
            for name, factor, acks, _ in cases if args.profile else ():
                if not name.startswith("mmlog"):
                    profiled(brokers, args, bootstrap, name, factor, acks)
            round_trips = {}
            for factor in (1, 3) if args.awaited else ():
                lead = brokers[make_topic(brokers, f"awaited-{factor}", factor)[0]]
                round_trips[factor] = awaited(lead.bootstrap, f"awaited-{factor}", args.awaited, args.size, args.batch)
        finally:
            for brokers in clusters.values():
                for b in brokers:
                    b.stop()
    shutil.rmtree(work, ignore_errors=True)  # gigabytes of segments (the profiles, if any, are elsewhere)
    plain, md = table(args, results, round_trips)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    facts = (f"{args.records:,} records of {args.size} B, batch {args.batch}, {args.partitions} partition(s) per "
             f"topic, {args.processors} processor(s) per broker, librdkafka {confluent_kafka.libversion()[0]}, "
             f"median of {args.rounds} rounds; mmlog {commit.strip() or '?'}"
             + (f" beside the baseline {args.baseline.name}" if args.baseline else "")
             + f", load average at start {load}")
    print("\n" + facts)
    print("\n".join(plain))
    if args.record:
        command = "python " + shlex.join(["tools/bench_replication.py", *sys.argv[1:]])
        section = "\n".join([f"`{command}`", "", facts, "", *md])
        page = ROOT / "docs" / "benchmarks.md"
        tag = f"bench_replication partitions-{args.partitions}"
        write_section(page, tag, section)
        print(f"wrote {page}")


if __name__ == "__main__":
    main()
