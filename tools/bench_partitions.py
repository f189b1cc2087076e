"""Produce throughput against the partition count, and a many-partition broker's start and stop, before and after.

    python tools/bench_partitions.py --baseline /path/to/other/tree             # 1, 1,000, 4,000, 10,000
    python tools/bench_partitions.py --baseline REF --tmpfs --flush-ms none     # the broker's CPU alone
    python tools/bench_partitions.py --baseline REF --partitions 1,1000 --seconds 5 --restart 0
    python tools/bench_partitions.py --baseline REF --partitions ""            # the restart case alone

Each case runs in a fresh interpreter on one tree's mmlog (`--baseline`: a checkout or
a git ref, unpacked; and this tree), the two alternating case by case in one run, so
both see the same machine. A case starts a broker (EmbeddedBroker, 2 processors, data
in a temporary directory, log.flush.interval.ms=1000 as tools/bench_curves.py), creates
one topic of N partitions, sends 3 requests to every partition (each processor opens
what it serves and touches every index's first page) and then measures, for
`--seconds` each:

* spread: tools/bench/mux_driver.py, 2 processes, 16 connections, 2 requests in flight
  each, 50 records a request, every request to the next partition (bench_curves'
  partitions curve);
* keyed: 2 librdkafka (confluent-kafka) producers, a key per record drawn over 4 x N
  keys, linger.ms=5: each request carries small batches for many partitions, as keyed
  producers send them.

Per point: msg/s, the broker's CPU (utime+stime of all its processes) per record, and
the ratio to the same tree's 1-partition figure; for the keyed load also the producers'
own CPU per record (their process time, librdkafka's threads included); the processors'
descriptors at the end.
The restart case (`--restart N`, default 11,111 partitions, one request to each) times a
clean stop after writes, a start to ready, and a stop with nothing written since.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench_partitions.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.bench.common import ClientProcess, payload  # noqa: E402
from tools.bench.trees import export_tree, head, run_in  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEYED_PRODUCERS = 2


def keyed_produce(bootstrap: str, topic: str, seconds: float, keys: int, ready, go) -> dict:
    """Client process: records with keys spread over `keys` keys, through librdkafka, for `seconds`."""
    from confluent_kafka import Producer

    value = payload()
    names = [b"key-%d" % i for i in range(keys)]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False,
                         "linger.ms": 5, "max.in.flight.requests.per.connection": 5,
                         "queue.buffering.max.messages": 1_000_000, "socket.nagle.disable": True})
    producer.produce(topic, value, key=names[0])
    producer.flush(60)
    ready.set()
    go.wait()
    produce, poll, sent, i = producer.produce, producer.poll, 0, 0
    started, cpu = time.monotonic(), time.process_time()  # the process's CPU: librdkafka's threads included
    end = started + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            i = (i + 7919) % keys
            while True:
                try:
                    produce(topic, value, key=names[i])
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    poll(0.05)
        sent += 1000
        poll(0)
    if producer.flush(120):
        raise RuntimeError("records left undelivered")
    return {"messages": sent, "seconds": time.monotonic() - started, "cpu": time.process_time() - cpu}


def _keyed(b, topic: str, partitions: int, seconds: float) -> tuple[int, float, float, float]:
    """(records, seconds, the broker's CPU s, the producers' CPU s) of the keyed load."""
    ctx = ClientProcess._ctx
    go, clients = ctx.Event(), []
    for _ in range(KEYED_PRODUCERS):
        ready = ctx.Event()
        clients.append((ClientProcess(keyed_produce, b.bootstrap, topic, seconds, 4 * partitions, ready=ready,
                                      go=go), ready))
    for client, ready in clients:
        client.wait_for(ready, 300, "connections")
    from tools.bench_curves import broker_cpu

    before = broker_cpu(b)
    go.set()
    results = [client.result(seconds + 300) for client, _ in clients]
    return (sum(r["messages"] for r in results), max(r["seconds"] for r in results), broker_cpu(b) - before,
            sum(r["cpu"] for r in results))


def case(partitions: int, seconds: float, flush_ms: int | None = 1000, where: str | None = None) -> dict:
    """One tree, one partition count: the spread and keyed loads (in the tree's interpreter); data in a
    temporary directory under `where` (None: the system's)."""
    import tools.bench_curves as curves
    from tools.bench_curves import (
        LOAD_CONNS,
        LOAD_PROCS,
        LOAD_WINDOW,
        WARM_REQUESTS,
        _fds,
        broker,
        create_topic,
        load,
    )

    curves.FLUSH_MS = flush_ms
    with tempfile.TemporaryDirectory(prefix="bench-partitions-", dir=where) as work, _started(broker(Path(work), "b")) as b:
        made = create_topic(b, "t", partitions)
        load(b, "t", partitions, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, requests=WARM_REQUESTS * partitions)
        spread = load(b, "t", partitions, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, seconds=seconds)
        keyed = _keyed(b, "t", partitions, seconds)
        return {"created_s": made, "fds": _fds(b),
                "spread": [spread.messages, spread.seconds, spread.cpu],
                "keyed": list(keyed)}


def _started(b):
    """The broker, given the time a tree that compiles its kernels cold needs to start and stop (as its
    context manager starts it)."""
    b.ready_timeout = 1800
    return b


def restart(partitions: int) -> dict:
    """One tree: a broker with `partitions` partitions, one request to each; stop, start, stop again (idle)."""
    from tools.bench_curves import (
        LOAD_CONNS,
        LOAD_PROCS,
        LOAD_WINDOW,
        broker,
        create_topic,
        load,
    )

    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as work, _started(broker(Path(work), "b")) as b:
        for i, start in enumerate(range(0, partitions, 10_000)):  # max.partitions.per.request: 10,000 a topic
            n = min(10_000, partitions - start)
            create_topic(b, f"t{i}", n)
            load(b, f"t{i}", n, LOAD_CONNS, LOAD_WINDOW, LOAD_PROCS, requests=n)
        started = time.monotonic()
        b.stop(timeout=600)
        stopped = time.monotonic()
        b.start()
        ready = time.monotonic()
        b.stop(timeout=600)
        idle_stopped = time.monotonic()
        b.start()  # for the context manager's stop
        return {"stop_after_writes_s": stopped - started, "start_s": ready - stopped,
                "idle_stop_s": idle_stopped - ready}


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python tools/bench_partitions.py", description=__doc__.splitlines()[0])
    p.add_argument("--baseline", required=True, help="a directory holding another mmlog package, or a git ref")
    p.add_argument("--partitions", default="1,1000,4000,10000")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--restart", type=int, default=11_111, help="partitions of the restart case (0: none)")
    p.add_argument("--flush-ms", default="1000", help="log.flush.interval.ms of the throughput cases' brokers "
                   "(default 1000, as tools/bench_curves.py); 'none': no time-based fsync")
    p.add_argument("--tmpfs", action="store_true", help="the throughput cases' data in /dev/shm (no disk: what "
                   "is left is the broker's CPU); the restart case stays on the system's temporary directory")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-partitions-trees-") as tmp:
        if Path(a.baseline).is_dir():
            base, base_name = Path(a.baseline).resolve(), Path(a.baseline).name
        else:
            base, base_name = export_tree(a.baseline, Path(tmp))
        trees = [("before", base, base_name), ("after", None, head())]
        flush_ms = None if a.flush_ms == "none" else int(a.flush_ms)
        where = "/dev/shm" if a.tmpfs else None
        rows = {}
        for n in [int(x) for x in a.partitions.split(",") if x]:
            for label, tree, name in trees:
                log(f"{n:,} partitions, {label} ({name})")
                rows[label, n] = r = run_in(tree, "tools.bench_partitions", f"case({n}, {a.seconds}, {flush_ms!r}, {where!r})")
                log(f"  {r}")
        restarts = {}
        if a.restart:
            for label, tree, name in trees:
                log(f"restart with {a.restart:,} partitions, {label} ({name})")
                restarts[label] = r = run_in(tree, "tools.bench_partitions", f"restart({a.restart})")
                log(f"  {r}")
    print(f"`python tools/bench_partitions.py {' '.join(sys.argv[1:] if argv is None else argv)}` "
          f"({time.strftime('%Y-%m-%d %H:%M %Z')}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"at end); before: {trees[0][2]}, after: {trees[1][2]}; {a.seconds:g} s a load, "
          f"log.flush.interval.ms={a.flush_ms}, data {'in /dev/shm' if a.tmpfs else 'on disk'}\n")
    print("| partitions | code | spread msg/s | x 1 partition | CPU µs/record | keyed msg/s | x 1 partition "
          "| CPU µs/record | producers' CPU µs/record | processors' descriptors |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ones = {}
    for (label, n), r in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0] != "before")):
        cells = []
        for what in ("spread", "keyed"):
            msgs, secs, cpu, *client = r[what]
            rate = msgs / secs if secs else 0.0
            ones.setdefault((label, what), rate if n == 1 else None)
            one = ones.get((label, what))
            cells += [f"{rate:,.0f}", f"{rate / one:.2f}" if one else "-", f"{cpu / msgs * 1e6:.2f}" if msgs else "-"]
            if what == "keyed":
                cells.append(f"{client[0] / msgs * 1e6:.2f}" if client and msgs else "-")
        name = dict((t[0], t[2]) for t in trees)[label]
        print(f"| {n:,} | {label}: {name} | {' | '.join(cells)} | {', '.join(f'{x:,}' for x in r['fds'][1:])} |")
    if restarts:
        print(f"\n| {a.restart:,} partitions | code | clean stop after writes s | start to ready s | stop, nothing "
              "written s |")
        print("| ---: | --- | ---: | ---: | ---: |")
        for label, tree, name in trees:
            r = restarts[label]
            print(f"| | {label}: {name} | {r['stop_after_writes_s']:.1f} | {r['start_s']:.1f} | "
                  f"{r['idle_stop_s']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
