"""One all-topics Metadata request over 10,000 partitions: its cost to a processor, before and after.

    python tools/bench_metadata.py             # 100 topics x 100 partitions; prints the figures
    python tools/bench_metadata.py --record    # and writes its section of docs/benchmarks.md
    python tools/bench_metadata.py --topics 1 --partitions 10000 --baseline main

One broker (this tree's code, one processor, data in a temporary directory) is given the
topics in one CreateTopics request (about a minute for 10,000 partitions on this machine),
then two measurements, in the same run:

* over the wire, this tree: all-topics Metadata requests on one connection, each timed
  (wall, round trip) with the broker's CPU (utime+stime of its processes before and after;
  10 ms ticks). The first request of each version encodes every topic entry (a miss: v12,
  then v11, v10, v9, v8), the rest of the v12 ones reuse them (hits);
* in process, the baseline against this tree, alternating: a child process runs the Metadata
  handler of the baseline's code (`git archive` of `--baseline`, main by default) or this
  tree's on the broker's own catalogue and cluster view (an attached LogManager and a
  ViewReader, as a processor has them) and times handle + encode_response with
  time.process_time (the processor's CPU: what every other connection of that processor
  waits for). This tree's child times misses (its topic entries dropped first) and hits.

Medians of the requests; the broker is stopped and its directory removed at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

if __package__ in (None, ""):  # `python tools/bench_metadata.py`: make `tools.bench` importable, after
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH: a child's mmlog is its tree's

from tools.bench.trees import export_tree, head, run_in  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "metadata-cache"


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# --- the child: one code tree's handler, in process ---------------------------------------------------------------

def child(data_dir: str, version: int, requests: int, misses: bool) -> dict:
    """Time `requests` all-topics Metadata requests through the handler of the mmlog on sys.path (CPU and wall
    seconds each); with `misses`, each one after dropping the kept topic entries (if this tree keeps any)."""
    from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader
    from mmlog.log.manager import LogManager
    from mmlog.processors.handlers import metadata as handler
    from mmlog.protocol import RequestHeader, encode_response
    from mmlog.protocol.messages import metadata

    try:
        from mmlog.processors.metadata_cache import TopicEntries
    except ImportError:  # the baseline: nothing kept
        TopicEntries = None  # noqa: N806
    data_dir = Path(data_dir)
    ctx = SimpleNamespace(
        manager=LogManager([data_dir], owner=False, broker_id=0), broker_id=0, cluster_id="bench",
        views=ViewReader(data_dir, ClusterView.standalone(Endpoint(0, "127.0.0.1", 9092))),
        authorizer=SimpleNamespace(enabled=False), config={"auto.create.topics.enable": False})
    ctx.metadata_entries = TopicEntries() if TopicEntries else None
    request = SimpleNamespace(body=metadata.REQUEST(topics=None), version=version,
                              conn=SimpleNamespace(listener_name=None))
    header = RequestHeader(metadata.API_KEY, version, 1, "bench")
    cpu, wall, size = [], [], 0
    for i in range(requests + 1):  # the first warms the codec and reads the catalogue: not counted
        if misses and TopicEntries:
            ctx.metadata_entries = TopicEntries()
        c0, w0 = time.process_time(), time.perf_counter()
        size = len(encode_response(header, handler.handle(ctx, request)))
        c1, w1 = time.process_time(), time.perf_counter()
        if i:
            cpu.append(c1 - c0)
            wall.append(w1 - w0)
    partitions = sum(info.partitions for info in ctx.manager.topics().values())
    return {"cpu": cpu, "wall": wall, "bytes": size, "partitions": partitions}


def run_child(tree: Path | None, data_dir: Path, version: int, requests: int, misses: bool) -> dict:
    """child() in a fresh interpreter on `tree`'s mmlog (None: this tree's)."""
    return run_in(tree, "tools.bench_metadata", f"child({str(data_dir)!r}, {version}, {requests}, {misses})")


# --- over the wire --------------------------------------------------------------------------------------------------

def create_topics(b, topics: int, partitions: int) -> float:
    from mmlog.client.connection import BrokerConnection
    from mmlog.protocol.messages import create_topics as ct

    host, port = b.bootstrap.rsplit(":", 1)
    started = time.monotonic()
    with BrokerConnection(host, int(port), timeout=1800) as conn:
        r = conn.request(ct.API_KEY, 4, ct.REQUEST(topics=[
            {"name": f"m{i:03d}", "num_partitions": partitions, "replication_factor": 1, "configs": []}
            for i in range(topics)], timeout_ms=1_800_000))
    failed = [t for t in r.topics if t.error_code]
    if failed:
        raise RuntimeError(f"creating topics: {failed[0]}")
    return time.monotonic() - started


def over_the_wire(b, hits: int) -> dict:
    """Misses (the first all-topics request at v12, v11, v10, v9, v8), each timed, and `hits` v12 ones timed
    together (the broker's CPU ticks are 10 ms): round trips of raw frames (no client decoding) and broker CPU."""
    from mmlog.client.connection import BrokerConnection
    from mmlog.protocol import RequestHeader, decode_response, encode_request
    from mmlog.protocol.messages import metadata
    from tools.bench.servers import cpu_seconds, group_pids

    def ask(conn, version: int) -> memoryview:
        conn.send_raw(encode_request(RequestHeader(metadata.API_KEY, version, 1, "bench"),
                                     metadata.REQUEST(topics=None)))
        return conn.receive_frame()

    host, port = b.bootstrap.rsplit(":", 1)
    pids = group_pids(b.pid)
    out = {"miss": [], "hits": hits}
    with BrokerConnection(host, int(port), timeout=600) as conn:
        for version in (12, 11, 10, 9, 8):
            c0, w0 = cpu_seconds(pids), time.perf_counter()
            frame = ask(conn, version)
            w1, c1 = time.perf_counter(), cpu_seconds(pids)
            out["miss"].append((w1 - w0, c1 - c0))
        _, body = decode_response(metadata.API_KEY, 8, frame)
        out["partitions"] = sum(len(t.partitions) for t in body.topics)
        walls = []
        c0 = cpu_seconds(pids)
        for _ in range(hits):
            w0 = time.perf_counter()
            ask(conn, 12)
            walls.append(time.perf_counter() - w0)
        out["hit_cpu"] = (cpu_seconds(pids) - c0) / hits
        out["hit_wall"] = walls
    return out


# --- the run ----------------------------------------------------------------------------------------------------------

def ms(values) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--version", type=int, default=12, help="Metadata version of the in-process requests")
    ap.add_argument("--requests", type=int, default=5, help="timed requests per child")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the baseline's and this tree's children")
    ap.add_argument("--baseline", default="main", help="git ref of the code before (default main)")
    ap.add_argument("--record", action="store_true", help="write the section of docs/benchmarks.md")
    args = ap.parse_args(argv)

    from mmlog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="mmlog-bench-metadata-") as tmp:
        base_tree, base_commit = export_tree(args.baseline, Path(tmp))
        here = head()
        b = EmbeddedBroker(Path(tmp) / "broker", processors=1)
        b.ready_timeout = 600
        with b:
            made = create_topics(b, args.topics, args.partitions)
            log(f"{args.topics} topics x {args.partitions} partitions created in {made:.1f} s")
            wire = over_the_wire(b, hits=50)
            log(f"over the wire ({wire['partitions']:,} partitions): miss {ms([w for w, _ in wire['miss']])} ms "
                f"(broker CPU {ms([c for _, c in wire['miss']])} ms), hit {ms(wire['hit_wall'])} ms "
                f"(broker CPU {wire['hit_cpu'] * 1000:.2f} ms)")
            runs = {"baseline": [], "miss": [], "hit": []}
            for r in range(args.rounds):
                runs["baseline"].append(run_child(base_tree, b.data_dir, args.version, args.requests, False))
                runs["miss"].append(run_child(None, b.data_dir, args.version, args.requests, True))
                runs["hit"].append(run_child(None, b.data_dir, args.version, args.requests, False))
                log(f"round {r + 1}: " + ", ".join(
                    f"{k} {ms(v[-1]['cpu'])} ms CPU" for k, v in runs.items()))
        cases = {k: ([c for x in v for c in x["cpu"]], [w for x in v for w in x["wall"]], v[0]["bytes"])
                 for k, v in runs.items()}
        assert len({v[0]["partitions"] for v in runs.values()}) == 1
    section = page(args, made, wire, cases, base_commit, here)
    from tools.bench.page import show

    show(section, SECTION, args.record)
    return 0


def page(args, made: float, wire: dict, cases: dict, base_commit: str, here: str) -> str:
    n = args.topics * args.partitions
    command = "python tools/bench_metadata.py --record" + (
        "" if (args.topics, args.partitions) == (100, 100) else f" --topics {args.topics} --partitions {args.partitions}")
    rows = [("before: baseline " + base_commit + ", every entry built and encoded", "baseline"),
            (f"after ({here}): first request, every entry encoded and kept (miss)", "miss"),
            (f"after ({here}): entries kept (hit)", "hit")]
    base = statistics.median(cases["baseline"][0])
    lines = [
        f"### Metadata for {n:,} partitions ({args.topics} topics x {args.partitions} partitions, one broker)",
        "",
        f"`{command}` ({time.strftime('%Y-%m-%d')}; the topics were created in {made:.0f} s). In process, "
        f"alternating {args.rounds} rounds of {args.requests} requests each: the Metadata handler plus "
        f"encode_response of one all-topics v{args.version} request, on the broker's own catalogue, timed with "
        "the process's CPU clock (what the processor's other connections wait for):",
        "",
        "| code | CPU ms (median) | wall ms (median) | response bytes | vs before |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key in rows:
        cpu, wall, size = cases[key]
        lines.append(f"| {label} | {ms(cpu)} | {ms(wall)} | {size:,} | "
                     f"{base / statistics.median(cpu):.1f}x |" if key != "baseline" else
                     f"| {label} | {ms(cpu)} | {ms(wall)} | {size:,} | 1x |")
    lines += [
        "",
        "Over the wire, this tree's broker (one processor), one connection: round trip (raw frames, not decoded) "
        "and the broker's CPU (utime+stime of its processes, 10 ms ticks) of an all-topics request, medians:",
        "",
        "| request | round trip ms | broker CPU ms |",
        "| --- | ---: | ---: |",
        f"| first at v12, v11, v10, v9, v8 (miss) | {ms([w for w, _ in wire['miss']])} | "
        f"{ms([c for _, c in wire['miss']])} |",
        f"| v12 again, {wire['hits']} times (hit; CPU: their total over {wire['hits']}) | {ms(wire['hit_wall'])} | "
        f"{wire['hit_cpu'] * 1000:.2f} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
