"""The cost of one request to the broker: CPU per request beside throughput, and where it goes.

    python tools/bench_request.py [--requests N] [--records M] [--processors P] [--rounds R] [--no-page]
                                  [--idempotent | --idempotent-only]
    python tools/bench_request.py --paired ROUNDS [--slice N] [--no-page]

Two brokers (EmbeddedBroker, loopback, P processors each): one with the compiled request path
(the default) and one with `compiled.request.path.enable=false` (the Python handlers, its
reference), rows taking turns between them; a one-partition topic per row, 200-byte
records, acks=1. Beside them, when `redis-server` is installed, Redis Streams with its
append-only file: XADD, each awaited before the next, on one raw socket (the server's CPU
per request is the figure to beat). For every row the broker's CPU (utime+stime of the main process and its
processors, from /proc, read when the client starts and when it ends) is divided by the
requests and by the records it served: on a shared machine that moves far less than the
throughput beside it.

  * awaited: one record a request, each awaited before the next (pre-encoded Produce v8
    frames on one socket, no client library): what one request costs end to end;
  * librdkafka batch 1: confluent-kafka, linger 0, one record a request, 5 requests in
    flight (`max.in.flight`), delivery reports served as it goes;
  * librdkafka batch 50: `batch.num.messages=50`, linger 5 ms, 5 in flight (the
    pipelined throughput row);
  * librdkafka idempotent (`--idempotent`, or `--idempotent-only` for these rows alone):
    enable.idempotence=true (acks=all), each request's records delivered before the next at batch 1
    and at batch 50, and batch 1 with 5 in flight;
  * awaited Fetch: a consumer's Fetch v11 of one partition holding one 200-byte record at offset 0
    (max_wait 0), each awaited before the next: the same small batch at the tail every time, so what
    one fetch costs end to end (`--fetch-only`: these rows alone).

`--paired` runs only the awaited Produce, to the two brokers, the syscall-only server and Redis taking
turns in one client process, slice after slice, each server's CPU read from the scheduler's clock
around its own slices (tools/bench/paired.py): on a host whose wake-ups cost twice as much one minute
as the next, the servers' ratios hold where rows run one after another do not.

Then the stages of one awaited request inside a processor, in-process (no epoll, a
socketpair for the client): each stage run on its own, timed with perf_counter_ns around
it, the fastest of R rounds (other processes only ever add time), beside the whole path
run the same way. The sum of the stages matches the whole within a few percent.

The figures and the command go to docs/benchmarks.md, between this tool's markers.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.connection import BrokerConnection  # noqa: E402
from mmlog.protocol import RequestHeader, encode_request  # noqa: E402
from mmlog.protocol.messages import fetch, produce  # noqa: E402
from mmlog.protocol.records import build_batch  # noqa: E402
from tools.bench.common import MESSAGE_SIZE, ClientProcess, Meter, payload  # noqa: E402
from tools.bench.floor import floor  # noqa: E402
from tools.bench.page import write_section  # noqa: E402
from tools.bench.servers import cpu_seconds, group_pids  # noqa: E402

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
WARM = 2_000  # requests before the clock starts (the connection, the shape and the template learned)


def produce_frame(topic: str, correlation_id: int) -> bytearray:
    """One Produce v8 request of one 200-byte record, acks=1."""
    body = produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(None, payload())])}]}])
    return encode_request(RequestHeader(produce.API_KEY, 8, correlation_id, "bench-request"), body)


def produce_error_at(topic: str) -> int:
    """Where a one-partition Produce v8 answer (after its size) holds the partition's error code."""
    return 4 + 4 + 2 + len(topic.encode()) + 4 + 4


def _exchanges(conn, frame, messages: int, failed, ready, go) -> dict:
    """`frame` sent `messages` times on conn, each answer read before the next send; failed(answer) says why an
    answer is wrong (None: it is right). WARM exchanges first, then ready/go, then the timed ones."""
    send, receive = conn.send_raw, conn.receive_frame
    for _ in range(WARM):
        send(frame)
        receive()
    ready.set()
    go.wait()
    meter, cpu = Meter(), time.process_time()
    for i in range(messages):
        send(frame)
        why = failed(receive())
        if why is not None:
            raise RuntimeError(why)
        if i % 1000 == 999:
            meter.tick(i + 1)
    conn.close()
    return {**meter.result(messages), "cpu": time.process_time() - cpu}


def _connect(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port))


def awaited(bootstrap: str, topic: str, messages: int, ready, go) -> dict:
    """Client process: `messages` pre-encoded one-record requests, each answered before the next is sent."""
    error_at = produce_error_at(topic)

    def failed(answer):
        code = int.from_bytes(answer[error_at:error_at + 2], "big")
        return f"produce failed: error code {code}" if code else None

    return _exchanges(_connect(bootstrap), produce_frame(topic, 1), messages, failed, ready, go)


def fetch_frame(topic: str, correlation_id: int) -> bytearray:
    """A consumer's Fetch v11 of partition 0 from offset 0, answered at once (max_wait 0)."""
    body = fetch.REQUEST(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                         topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                  "partition_max_bytes": 1 << 20}]}],
                         forgotten_topics_data=[])
    return encode_request(RequestHeader(fetch.API_KEY, 11, correlation_id, "bench-request"), body)


def awaited_fetch(bootstrap: str, topic: str, messages: int, ready, go) -> dict:
    """Client process: one record produced, then `messages` Fetches of it, each answered before the next."""
    conn = _connect(bootstrap)
    conn.send_raw(produce_frame(topic, 1))
    conn.receive_frame()
    frame = fetch_frame(topic, 2)
    # v11 response: correlation id, throttle, error, session, topic count, topic, partition count, index
    error_at = 4 + 4 + 2 + 4 + 4 + 2 + len(topic.encode()) + 4 + 4
    records_at = error_at + 2 + 8 + 8 + 8 + 4 + 4  # error, HW, LSO, log start, aborted (null), preferred replica
    conn.send_raw(frame)
    size = len(conn.receive_frame())

    def failed(answer):
        empty = answer[records_at:records_at + 4] == bytes(4)
        if answer[error_at] or answer[error_at + 1] or len(answer) != size or empty:
            return f"fetch failed: {bytes(answer)!r}"
        return None

    return _exchanges(conn, frame, messages, failed, ready, go)


def librdkafka(bootstrap: str, topic: str, messages: int, batch: int, idempotent: bool = False,
               awaited: bool = False, *, ready, go) -> dict:
    """Client process: librdkafka, `batch` records a request (linger 0 at batch 1, else 5 ms), 5 in flight;
    `idempotent`: enable.idempotence (and so acks=all); `awaited`: each request's records delivered (flush)
    before the next are produced."""
    from tools.bench.kafka_driver import _delivered, _producer, send_pipelined

    failures: list = []
    report = _delivered(failures)
    linger = {"linger.ms": 0, "batch.num.messages": 1} if batch == 1 else {"linger.ms": 5, "batch.num.messages": batch}
    producer = _producer(bootstrap, "all" if idempotent else 1, **linger, **{"enable.idempotence": idempotent})
    value = payload()
    for _ in range(WARM):
        producer.produce(topic, value, on_delivery=report)
    producer.flush(30)
    ready.set()
    go.wait()
    cpu = time.process_time()
    if awaited:
        meter = Meter()
        for i in range(0, messages, batch):
            for _ in range(batch):
                producer.produce(topic, value, on_delivery=report)
            producer.flush(30)
            if i % 1000 < batch:
                meter.tick(i + batch)
        if failures:
            raise RuntimeError(f"librdkafka: {len(failures)} records failed, the first: {failures[0]}")
        result = meter.result(messages)
    else:
        result = send_pipelined(producer, topic, value, messages, report, failures)
    return {**result, "cpu": time.process_time() - cpu}  # librdkafka's threads included


class Row(collections.namedtuple("Row", "name records requests seconds cpu client_cpu")):
    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def us_per_request(self) -> float:
        return self.cpu / self.requests * 1e6

    @property
    def s_per_million(self) -> float:
        return self.cpu / self.records * 1e6

    @property
    def client_s_per_million(self) -> float:
        return self.client_cpu / self.records * 1e6


def redis_awaited(bootstrap: str, key: str, messages: int, ready, go) -> dict:
    """Client process: XADD of one 200-byte field, each reply read before the next command (raw RESP)."""
    from tools.bench.resp import awaited_xadd, encode_command

    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    command = encode_command("XADD", key, "*", "v", payload())
    buf = bytearray(256)
    for _ in range(WARM):
        awaited_xadd(sock, command, buf)
    ready.set()
    go.wait()
    meter, cpu = Meter(), time.process_time()
    for i in range(messages):
        awaited_xadd(sock, command, buf)
        if i % 1000 == 999:
            meter.tick(i + 1)
    sock.close()
    return {**meter.result(messages), "cpu": time.process_time() - cpu}


def redis_row(server, requests: int) -> Row:
    return _timed(f"127.0.0.1:{server.port}", server.pids(), "Redis Streams XADD, awaited", "bench", requests,
                  requests, redis_awaited)


def floor_row(requests: int) -> Row:
    """The awaited row against `floor_server`, started and stopped here."""
    with floor() as (port, pid):
        return _timed(f"127.0.0.1:{port}", [pid], "syscalls alone (baseline)", "floor", requests, requests, awaited)


def run_client(broker, name: str, records: int, requests: int, fn, *args) -> Row:
    """fn(bootstrap, topic, records, *args, ready=, go=) in a client process; the broker's CPU across it."""
    topic = f"request-{len(name)}-{time.monotonic_ns()}"
    Admin(broker.bootstrap).create_topic(topic, 1)
    return _timed(broker.bootstrap, group_pids(broker.pid), name, topic, records, requests, fn, *args)


def _timed(bootstrap: str, pids: list, name: str, topic: str, records: int, requests: int, fn, *args) -> Row:
    ctx = ClientProcess._ctx
    ready, go = ctx.Event(), ctx.Event()
    client = ClientProcess(fn, bootstrap, topic, records, *args, ready=ready, go=go)
    client.wait_for(ready, 120, "warm-up")
    before = cpu_seconds(pids)
    go.set()
    result = client.result(600)
    return Row(name, records, requests, result["seconds"], cpu_seconds(pids) - before, result["cpu"])


PATHS = (("compiled", "true"), ("Python", "false"))  # (row suffix, compiled.request.path.enable)


def broker_rows(args) -> list[Row]:
    import shutil

    from mmlog.testing import EmbeddedBroker
    from tools.bench.servers import RedisServer

    rows = []
    with contextlib.ExitStack() as stack:
        data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        brokers = [(suffix, stack.enter_context(EmbeddedBroker(_secured(data / suffix, args.secured),
                                                               processors=args.processors, config={
            "compiled.request.path.enable": enable, **(SECURED if args.secured else {})}))) for suffix, enable in PATHS]
        if args.secured:
            _quota_elsewhere(brokers)
            brokers = [(f"{suffix}, ACLs and quotas", broker) for suffix, broker in brokers]
        redis = stack.enter_context(RedisServer(data)) if shutil.which("redis-server") else None
        for r in range(args.rounds):
            done = len(rows)
            for suffix, broker in brokers if not args.idempotent_only else ():
                rows.append(run_client(broker, f"awaited Fetch of one batch ({suffix})", args.requests, args.requests,
                                       awaited_fetch))
            if args.secured:
                for suffix, broker in brokers:
                    rows.append(run_client(broker, f"awaited, batch 1 ({suffix})", args.requests, args.requests,
                                           awaited))
            if args.fetch_only or args.secured:
                _print(r, rows[done:])
                continue
            if args.idempotent or args.idempotent_only:
                rows += idempotent_rows(args, brokers)
            if args.idempotent_only:
                _print(r, rows[done:])
                continue
            rows.append(floor_row(args.requests))
            if redis is not None:
                rows.append(redis_row(redis, args.requests))
            for suffix, broker in brokers:
                rows.append(run_client(broker, f"awaited, batch 1 ({suffix})", args.requests, args.requests, awaited))
            for suffix, broker in brokers:
                rows.append(run_client(broker, f"librdkafka batch 1, 5 in flight ({suffix})", args.requests * 2,
                                       args.requests * 2, librdkafka, 1))
            for suffix, broker in brokers:
                rows.append(run_client(broker, f"librdkafka batch 50 ({suffix})", args.records, args.records // 50,
                                       librdkafka, 50))
            _print(r, rows[done:])
    return rows


def kafka_server(name: str, address: str, pids, topic: str):
    """A server of the --paired comparison, answering this tool's one-record Produce to `topic`."""
    from tools.bench.paired import Server

    host, port = address.rsplit(":", 1)
    return Server(name, host, int(port), tuple(pids), "kafka", bytes(produce_frame(topic, 1)), produce_error_at(topic))


def paired(args) -> str:
    """--paired: one awaited Produce to each server in turn, slice after slice (tools/bench/paired.py)."""
    import shutil

    from mmlog.testing import EmbeddedBroker
    from tools.bench import paired as pairing
    from tools.bench.resp import encode_command
    from tools.bench.servers import RedisServer

    with contextlib.ExitStack() as stack:
        data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        servers = []
        for suffix, enable in PATHS:
            broker = stack.enter_context(EmbeddedBroker(data / suffix, processors=args.processors,
                                                        config={"compiled.request.path.enable": enable}))
            Admin(broker.bootstrap).create_topic("paired", 1)
            servers.append(kafka_server(f"mmlog ({suffix})", broker.bootstrap, group_pids(broker.pid), "paired"))
        port, pid = stack.enter_context(floor())
        servers.append(kafka_server("syscalls alone (baseline)", f"127.0.0.1:{port}", [pid], "floor"))
        if shutil.which("redis-server"):
            redis = stack.enter_context(RedisServer(data))
            servers.append(pairing.Server("Redis Streams XADD", "127.0.0.1", redis.port, tuple(redis.pids()), "resp",
                                          encode_command("XADD", "bench", "*", "v", payload())))
        tallies = ClientProcess(pairing.interleaved, servers, args.paired, args.slice, WARM).result(3600)
    command = "python tools/bench_request.py " + " ".join(sys.argv[1:])
    lines = ["### Awaited requests, the servers taking turns", "",
             f"`{command.strip()}` ({time.strftime('%Y-%m-%d %H:%M %Z')}): one client process, one connection to "
             f"each server, {args.slice:,} awaited "
             f"one-record requests (200 bytes, acks=1) to each in turn, {args.paired} rounds, the order rotating; "
             "each server's CPU from its threads' schedstat (ns) around its own slices. The servers share every "
             "minute of the run, so their ratios hold where the absolute figures move with the host.", ""]
    return "\n".join(lines + pairing.table(tallies, [t.name for t in tallies[1:]]) + [""])


# --secured: the ACL authoriser on, nothing allowed that no ACL allows, ALLOW ACLs for the benchmark's
# principal (User:ANONYMOUS) on every topic and the cluster; and client quotas on, set for another client id (so every request
# resolves its client's quotas, and finds none).
SECURED = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}


def _secured(data: Path, secured: bool) -> Path:
    """The broker's data dir, with the ACL store written first when secured."""
    if secured:
        from mmlog.security import acls

        data.mkdir(parents=True)
        acls.save(acls.path_in(data), [
            acls.Binding(acls.TOPIC, "", acls.PREFIXED, "User:ANONYMOUS", "*", acls.ALL, acls.ALLOW),
            acls.Binding(acls.CLUSTER, acls.CLUSTER_NAME, acls.LITERAL, "User:ANONYMOUS", "*", acls.ALL, acls.ALLOW)])
    return data


def _quota_elsewhere(brokers) -> None:
    from mmlog.client import Admin

    for _, broker in brokers:
        with Admin(broker.bootstrap) as admin:
            admin.alter_client_quotas({(("client-id", "someone-else"),): {"producer_byte_rate": 1_000_000}})
    time.sleep(1.5)  # every processor re-reads the catalogue within a second


def idempotent_rows(args, brokers) -> list[Row]:
    """librdkafka with enable.idempotence (acks=all): each request awaited at batch 1 and at batch 50, and
    batch 1 with 5 in flight; compiled and Python in turn."""
    rows = []
    awaited_records = args.requests // 4  # a flush per request: librdkafka's own wake-ups dominate
    for suffix, broker in brokers:
        rows.append(run_client(broker, f"librdkafka idempotent, awaited batch 1 ({suffix})", awaited_records,
                               awaited_records, librdkafka, 1, True, True))
    for suffix, broker in brokers:
        rows.append(run_client(broker, f"librdkafka idempotent, awaited batch 50 ({suffix})", awaited_records * 50,
                               awaited_records, librdkafka, 50, True, True))
    for suffix, broker in brokers:
        rows.append(run_client(broker, f"librdkafka idempotent batch 1, 5 in flight ({suffix})", args.requests * 2,
                               args.requests * 2, librdkafka, 1, True))
    return rows


def _print(r: int, rows: list[Row]) -> None:
    for row in rows:
        print(f"round {r + 1}: {row.name:<45} {row.rate:>11,.0f} msg/s  broker CPU {row.us_per_request:6.1f} "
              f"us/request, {row.s_per_million:5.2f} s per million records; client "
              f"{row.client_s_per_million:5.2f} s per million", flush=True)


# ---------------------------------------------------------------- stages, in-process

STAGES = ["framing (bytes in, frame out)", "header (the request shape)", "partition look-up",
          "validate (length, magic, CRC-32C, sizes)", "lock, repair check, snapshot",
          "append (indexes, pwrite, state publish)", "unlock", "response encode (template)",
          "queue the response", "send"]


def stages(rounds: int, n: int) -> tuple[dict, float]:
    """({stage: us}, whole path us) for one-record Produce requests handled in this process."""
    from mmlog.ipc.metrics_block import NULL_REGION
    from mmlog.log.manager import LogManager
    from mmlog.log.segment_view import now_ms
    from mmlog.processors.connection import Connection
    from mmlog.processors.dispatch import handle_requests
    from mmlog.processors.handlers import produce as handler
    from mmlog.testing import LocalHandlerContext

    ns = time.perf_counter_ns
    with tempfile.TemporaryDirectory() as data:
        manager = LogManager(Path(data))
        manager.create_topic("t", 1)
        frame = bytes(produce_frame("t", 7))
        a, b = socket.socketpair()
        sink = bytearray(1 << 16)
        conn = Connection(a, 1 << 20)
        ctx = LocalHandlerContext(manager, NULL_REGION)

        def whole() -> None:
            conn.reader.feed(frame)
            conn.stamp(time.monotonic())
            handle_requests(ctx, conn)
            conn.flush(NULL_REGION)
            b.recv_into(sink)

        for _ in range(WARM):
            whole()
        shape, log = conn.produce_shape, manager.partition("t", 0)
        best = dict.fromkeys(STAGES, float("inf"))
        best_whole = float("inf")
        for _ in range(rounds):
            spent = [0] * len(STAGES)
            for _ in range(n):
                t0 = ns()
                conn.reader.feed(frame)
                conn.stamp(time.monotonic())
                f = conn.next_request()
                t1 = ns()
                request = shape.read(f)
                t2 = ns()
                part = manager.partition("t", 0)
                t3 = ns()
                buf, headers = part._validate(request[2][0][1][0][1])
                t4 = ns()
                snap = part._begin_write()
                t5 = ns()
                out = [None]
                part._append_locked(snap, [(0, buf, headers)], now_ms(), out)
                t6 = ns()
                part.lock.release()
                t7 = ns()
                answer = handler._answer(request[0], [("t", [(0, 0, out[0].base_offset, out[0].log_start_offset,
                                                                None)])])
                t8 = ns()
                conn.queue((answer,))
                t9 = ns()
                conn.flush(NULL_REGION)
                t10 = ns()
                b.recv_into(sink)
                for i, (x, y) in enumerate(zip((t0, t1, t2, t3, t4, t5, t6, t7, t8, t9), (t1, t2, t3, t4, t5, t6, t7,
                                                                                           t8, t9, t10))):
                    spent[i] += y - x
            for name, total in zip(STAGES, spent):
                best[name] = min(best[name], total / n / 1000)
            t0 = ns()
            for _ in range(n):
                whole()
            best_whole = min(best_whole, (ns() - t0) / n / 1000)
        a.close()
        b.close()
        del log
        manager.close()
    return best, best_whole


# ---------------------------------------------------------------- the page

def section(args, rows: list[Row], stage_us: dict, whole_us: float) -> str:
    import statistics

    command = "python tools/bench_request.py " + " ".join(sys.argv[1:])
    lines = ["## The cost of one request", "",
             f"`{command.strip()}`: two brokers (compiled request path on, and off: Python) "
             f"with {args.processors} processor(s), {MESSAGE_SIZE}-byte records, "
             f"acks=1, one partition; medians of {args.rounds} round(s) with the rounds' range. Broker CPU is "
             "utime+stime of the broker's processes (from /proc) over the client's run; the client's is its "
             "process time (librdkafka's threads included), on the same two cores.", "",
             "| row | msg/s | broker CPU µs per request | broker CPU s per million records | client CPU s per million "
             "records |", "|---|---:|---:|---:|---:|"]
    by_name: dict[str, list[Row]] = collections.defaultdict(list)
    for row in rows:
        by_name[row.name].append(row)
    for name, rs in by_name.items():
        def fmt(values, spec):
            med = statistics.median(values)
            return f"{med:{spec}}" + (f" ({min(values):{spec}}–{max(values):{spec}})" if len(values) > 1 else "")
        cells = [fmt([r.rate for r in rs], ",.0f"), fmt([r.us_per_request for r in rs], ".1f"),
                 fmt([r.s_per_million for r in rs], ".2f"), fmt([r.client_s_per_million for r in rs], ".2f")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"Stages of one awaited request inside a processor (in-process, the fastest of {args.rounds * 4} "
              "rounds, µs):", "", "| stage | µs |", "|---|---:|"]
    lines += [f"| {name} | {us:.2f} |" for name, us in stage_us.items()]
    lines += [f"| sum of the stages | {sum(stage_us.values()):.2f} |",
              f"| the whole path, run alone | {whole_us:.2f} |", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000,
                        help="awaited requests per round (librdkafka batch 1: 2x)")
    parser.add_argument("--records", type=int, default=2_000_000, help="records per librdkafka batch-50 round")
    parser.add_argument("--processors", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages-only", action="store_true", help="only the in-process stages")
    parser.add_argument("--fetch-only", action="store_true", help="only the awaited Fetch rows (no page, no stages)")
    parser.add_argument("--idempotent", action="store_true",
                        help="add librdkafka rows with enable.idempotence (awaited batch 1 and 50, 5 in flight)")
    parser.add_argument("--idempotent-only", action="store_true", help="only those rows (no page, no stages)")
    parser.add_argument("--secured", action="store_true", help="only the awaited rows, both brokers with the ACL "
                        "authoriser (one ALLOW ACL) and client quotas (set for another client id); no page, no stages")
    parser.add_argument("--paired", type=int, metavar="ROUNDS", help="only the awaited Produce, to every server "
                        "in turn (compiled, Python, the syscalls alone, Redis), ROUNDS slices each")
    parser.add_argument("--slice", type=int, default=1_000, help="requests per server per slice with --paired")
    parser.add_argument("--no-page", action="store_true", help="print, do not update docs/benchmarks.md")
    args = parser.parse_args()
    if args.paired:
        text = paired(args)
        print(text)
        if not args.no_page:
            write_section(PAGE, "bench_request_paired", text)
        return
    rows = [] if args.stages_only else broker_rows(args)
    if args.fetch_only or args.idempotent_only or args.secured:
        return
    stage_us, whole_us = stages(args.rounds * 4, 5_000)
    for name, us in stage_us.items():
        print(f"{us:8.2f} us  {name}")
    print(f"{sum(stage_us.values()):8.2f} us  sum of the stages\n{whole_us:8.2f} us  the whole path, run alone")
    if not args.no_page and rows:
        write_section(PAGE, "bench_request", section(args, rows, stage_us, whole_us))
        print(f"updated {PAGE}")


if __name__ == "__main__":
    main()
