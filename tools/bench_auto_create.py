"""Group heartbeat latency while Metadata auto-creates thousands of topics, beside the same
machine's latency with nothing being created (docs/robustness.md).

    PYTHONPATH=. python tools/bench_auto_create.py [--topics 2000] [--rounds 3] [--idle-s 8] [--processors 2]

Starts a broker (2 processors by default, loopback, temp dir) and a group member in a process of its
own that heartbeats every 20 ms. Each round measures the heartbeats for `--idle-s` with
nothing else going on, then while one client asks Metadata for `--topics` unknown names
until all exist (as clients do: back off 100 ms, ask for those still missing). Prints
p50/p99/max per phase and round, and the broker's CPU time per topic created (main process
and processors, from /proc: steadier than latency when the machine is shared): the idle phase is the machine's own noise, the creation
phase what auto-creation adds to it. Each round creates new names.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

from mmlog.client.connection import BrokerConnection
from mmlog.protocol.messages import heartbeat, join_group, metadata, sync_group
from mmlog.testing import EmbeddedBroker

HEARTBEAT_EVERY_S = 0.02


def connect(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=60)


def heartbeat_until_told(bootstrap, phase, out) -> None:
    """Join a group alone, then heartbeat every 20 ms, putting (phase, seconds) on `out` per round
    trip until the phase is -1. JoinGroup v3 hands out a member id at once."""
    with connect(bootstrap) as conn:
        joined = conn.request(join_group.API_KEY, 3, join_group.REQUEST(
            group_id="bench", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}]))
        member, generation = joined.member_id, joined.generation_id
        conn.request(sync_group.API_KEY, 2, sync_group.REQUEST(
            group_id="bench", generation_id=generation, member_id=member,
            assignments=[{"member_id": member, "assignment": b""}]))
        while (now := phase.value) >= 0:
            started = time.perf_counter()
            code = conn.request(heartbeat.API_KEY, 2, heartbeat.REQUEST(
                group_id="bench", generation_id=generation, member_id=member)).error_code
            out.put((now, time.perf_counter() - started if code == 0 else float("inf")))
            time.sleep(HEARTBEAT_EVERY_S)
    out.put(None)


def auto_create(bootstrap: str, names: list[str]) -> tuple[float, int]:
    """Ask Metadata for `names` until every one exists; (seconds, requests)."""
    started, rounds, wanted = time.monotonic(), 0, list(names)
    with connect(bootstrap) as conn:
        while wanted:
            rounds += 1
            r = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": n} for n in wanted]))
            wanted = [t.name for t in r.topics if t.error_code != 0]
            if wanted:
                time.sleep(0.1)
    return time.monotonic() - started, rounds


def cpu_seconds(pids) -> float:
    """utime + stime of the given processes so far (steadier than wall time on a shared machine)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def figures(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"n={len(ms):4d}  p50 {statistics.median(ms):6.1f} ms  p99 {p99:6.1f} ms  max {ms[-1]:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=8.0)
    parser.add_argument("--processors", type=int, default=2)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("fork")
    with EmbeddedBroker(processors=args.processors, config={"group.initial.rebalance.delay.ms": 0,
                                              "auto.create.topics.max.per.second": 500}) as broker:
        phase, out = ctx.Value("i", 0), ctx.Queue()
        member = ctx.Process(target=heartbeat_until_told, args=(broker.bootstrap, phase, out), daemon=True)
        member.start()
        took = []
        for r in range(args.rounds):
            phase.value = 2 * r + 1  # odd: idle
            time.sleep(args.idle_s)
            phase.value = 2 * r + 2  # even: creating
            pids = [broker.pid, *broker.processor_pids()]
            cpu, procs = cpu_seconds(pids), cpu_seconds(pids[1:])
            seconds, requests = auto_create(broker.bootstrap, [f"auto-{r}-{i:05d}" for i in range(args.topics)])
            spent, in_procs = cpu_seconds(pids) - cpu, cpu_seconds(pids[1:]) - procs
            took.append((seconds, requests, spent, in_procs))
        phase.value = -1
        seen: dict[int, list[float]] = {}
        while (item := out.get(timeout=30)) is not None:
            seen.setdefault(item[0], []).append(item[1])
        member.join(10)
    print(f"heartbeats every {HEARTBEAT_EVERY_S * 1000:.0f} ms; {args.topics} topics auto-created per round")
    for r in range(args.rounds):
        seconds, requests, cpu, in_procs = took[r]
        print(f"round {r + 1}  idle      {figures(seen.get(2 * r + 1, [0.0]))}")
        print(f"round {r + 1}  creating  {figures(seen.get(2 * r + 2, [0.0]))}  "
              f"({seconds:.1f} s, {requests} Metadata requests, broker CPU {cpu / args.topics * 1000:.2f} ms a topic, "
              f"{in_procs / cpu:.0%} of it in processors)")
    idle = [x for k, v in seen.items() if k % 2 for x in v]
    busy = [x for k, v in seen.items() if k > 0 and not k % 2 for x in v]
    print(f"all     idle      {figures(idle)}")
    print(f"all     creating  {figures(busy)}")


if __name__ == "__main__":
    main()
