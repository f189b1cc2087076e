"""Broker throughput over the Kafka protocol, beside a loopback sendfile ceiling from the same run.

    python tools/bench_broker.py [--records N] [--processors P] [--window W] [--bootstrap HOST:PORT]

Starts a broker (EmbeddedBroker, loopback, temp dir), then:
  * produce: one connection, acks=1, 200-byte records in batches of 1 and of 50,
    requests pipelined W deep (sent in bunches, answers read in bunches); the
    requests are encoded before the clock starts, so this measures the broker (and
    the socket), not a client's batching;
  * consume: one connection reading everything back with 1 MiB fetches
    (records counted from the batch headers, as a consumer's bulk path would);
  * ceiling: os.sendfile of a page-cached file of the same size to a loopback
    TCP socket drained by a thread, the best any broker can do here.
Prints msg/s, MB/s and each figure's ratio to the ceiling.

    python tools/bench_broker.py --metrics-cost [--rounds R] [--records N]

The cost of metrics instead: two brokers, one with metrics.listen set (every request
counted in the shared block, ipc/metrics_block.py) and one without, and the produce
runs above (batches of 1, then 50) alternating between them, R rounds each, the
order flipped every round so that drift on a shared machine falls on both alike.
Prints each side's median msg/s and the throughput cost: 1 - the median of the
rounds' on/off ratios (each round ran both sides back to back), with its quartiles;
and the CPU the broker's processes spent per message on each side (from /proc),
which a loaded machine disturbs far less than throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from mmlog.client.connection import BrokerConnection
from mmlog.ipc.metrics_block import NULL_REGION, MetricsBlock
from mmlog.log.manager import LogManager
from mmlog.processors.connection import Connection
from mmlog.processors.dispatch import handle_requests
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import fetch, metadata, produce
from mmlog.protocol.records import build_batch, iter_batches
from mmlog.testing import EmbeddedBroker, LocalHandlerContext

RECORD = 200


def build_frames(topic: str, records: int, per_batch: int) -> list[bytearray]:
    """Every produce request of the run, encoded up front (correlation ids 1..n)."""
    batch = build_batch([(None, b"x" * RECORD)] * per_batch)
    body = produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])
    return [encode_request(RequestHeader(produce.API_KEY, 8, i + 1, "bench"), body)
            for i in range(records // per_batch)]


def bench_produce(conn: BrokerConnection, topic: str, records: int, per_batch: int, window: int) -> float:
    """Pipelined produce requests, `window` in flight; error codes read straight from the response bytes.

    As a pipelining producer does, whatever fits the window goes out in one send, and every
    response already received is taken before waiting again: the broker sees requests arrive
    in bunches and answers them in bunches, and this client's own cost per request stays small.
    """
    frames = build_frames(topic, records, per_batch)
    # v8 response: correlation id, topic count, name, partition count, index, error code
    error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
    reader = conn._reader
    start = time.perf_counter()
    sent = received = 0
    while received < len(frames):
        room = min(window - (sent - received), len(frames) - sent)
        if room > 0:
            conn.send_raw(b"".join(frames[sent:sent + room]))
            sent += room
        check(conn.receive_frame(), error_at)
        received += 1
        frame = reader.next_frame()
        while frame is not None:
            check(frame, error_at)
            received += 1
            frame = reader.next_frame()
    return time.perf_counter() - start


def check(frame, error_at: int) -> None:
    code = int.from_bytes(frame[error_at : error_at + 2], "big", signed=True)
    if code:
        raise SystemExit(f"produce failed with error {code}")


def bench_consume(conn: BrokerConnection, topic: str, expected: int) -> tuple[float, int]:
    offset = 0
    count = 0
    nbytes = 0
    start = time.perf_counter()
    while count < expected:
        body = conn.request(fetch.API_KEY, 11, fetch.REQUEST(
            max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                      "partition_max_bytes": 1 << 20}]}]))
        data = body.responses[0].partitions[0].records
        nbytes += len(data)
        for _, header in iter_batches(data):
            if header.last_offset >= offset:
                count += header.last_offset + 1 - max(offset, header.base_offset)
                offset = header.next_offset
    return time.perf_counter() - start, nbytes


def sendfile_ceiling(nbytes: int) -> float:
    """Seconds to sendfile nbytes of a page-cached file over loopback TCP."""
    with tempfile.TemporaryFile() as f:
        chunk = os.urandom(1 << 20)
        for _ in range(max(1, nbytes >> 20)):
            f.write(chunk)
        f.flush()
        size = f.tell()
        listener = socket.create_server(("127.0.0.1", 0))
        sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()

        def drain():
            buf = bytearray(1 << 20)
            left = size
            while left:
                left -= receiver.recv_into(buf)

        t = threading.Thread(target=drain)
        os.pread(f.fileno(), size, 0)  # warm the page cache
        t.start()
        start = time.perf_counter()
        offset = 0
        while offset < size:
            offset += os.sendfile(sender.fileno(), f.fileno(), offset, size - offset)
        t.join()
        elapsed = time.perf_counter() - start
        for s in (sender, receiver, listener):
            s.close()
        return elapsed * nbytes / size


def broker_cpu(broker: EmbeddedBroker) -> int:
    """Clock ticks (user + system) the broker's main process and its children have used so far."""
    total = 0
    for pid in [broker.pid, *broker.processor_pids()]:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of proc(5))
    return total


def metrics_cost(processors: int, records: int, rounds: int, window: int) -> None:
    """Produce with metrics on vs off, interleaved in one run; print the medians and the cost."""
    with EmbeddedBroker(processors=processors, config={"metrics.listen": "127.0.0.1:0"}) as on, \
            EmbeddedBroker(processors=processors) as off:
        conns = {}
        for name, broker in (("on", on), ("off", off)):
            host, port = broker.bootstrap.rsplit(":", 1)
            conns[name] = BrokerConnection(host, int(port))
        brokers = {"on": on, "off": off}
        print(f"{'':<12}{'msg/s':>24}{'throughput cost':>19}{'':<10}{'broker CPU us/msg':>24}")
        print(f"{'produce':<12}{'on':>12}{'off':>12}{'median':>8}{'quartiles':>13}{'':<5}{'on':>8}{'off':>8}"
              f"{'cost':>8}")
        for per_batch, count in ((1, records // 10), (50, records)):
            topic = f"cost-{per_batch}"
            rates: dict[str, list[float]] = {"on": [], "off": []}
            for name, conn in conns.items():
                conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": topic}]))
                bench_produce(conn, topic, count // 4, per_batch, window)  # warm: compile, page cache
            cpu = {"on": 0, "off": 0}  # clock ticks the broker's processes spent in the runs
            for r in range(rounds):
                for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
                    ticks = broker_cpu(brokers[name])
                    rates[name].append(count / bench_produce(conns[name], topic, count, per_batch, window))
                    cpu[name] += broker_cpu(brokers[name]) - ticks
            on_rate, off_rate = statistics.median(rates["on"]), statistics.median(rates["off"])
            # Each round ran both back to back: its ratio is the paired comparison, less exposed to drift.
            paired = sorted(on / off for on, off in zip(rates["on"], rates["off"]))
            q1, _, q3 = statistics.quantiles(paired, n=4)
            per_msg = {name: ticks / os.sysconf("SC_CLK_TCK") / (count * rounds) * 1e6 for name, ticks in cpu.items()}
            print(f"{f'batch {per_batch}':<12}{on_rate:>12,.0f}{off_rate:>12,.0f}"
                  f"{1 - statistics.median(paired):>8.1%} {1 - q3:>7.1%} .. {1 - q1:<7.1%}"
                  f"{per_msg['on']:>8.2f}{per_msg['off']:>8.2f}{per_msg['on'] / per_msg['off'] - 1:>8.1%}")
        for conn in conns.values():
            conn.close()


def metrics_cost_in_process(rounds: int, requests: int, group: int) -> None:
    """The broker's produce path alone (dispatch, handler, append, response), metrics on vs off.

    No socket, no client and no scheduler between the rounds: the processor's own CPU per request,
    which a shared machine disturbs far less than a whole broker's throughput."""
    with tempfile.TemporaryDirectory() as data:
        manager = LogManager(Path(data))
        manager.create_topic("t", 1)
        block = MetricsBlock(1)
        sides = {"on": block.processor(0), "off": NULL_REGION}
        body = produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": build_batch([(None, b"x" * RECORD)])}]}])
        frames = b"".join(encode_request(RequestHeader(produce.API_KEY, 8, i, "bench"), body) for i in range(group))
        a, b = socket.socketpair()
        sink = bytearray(1 << 20)  # the responses of a group, read back and dropped
        conn = Connection(a, 1 << 20)
        times: dict[str, list[float]] = {"on": [], "off": []}
        for r in range(rounds + 1):
            for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
                ctx = LocalHandlerContext(manager, sides[name])
                start = time.process_time()
                for _ in range(requests // group):
                    conn.reader.feed(frames)
                    conn.stamp(time.monotonic())  # what a read does: the frames' arrival, for queue time
                    handle_requests(ctx, conn)
                    conn.flush(sides[name])  # written whole: send and total time counted (on)
                    b.recv_into(sink)
                if r:  # round 0 warms up
                    times[name].append((time.process_time() - start) / requests * 1e6)
        a.close()
        b.close()
        manager.close()
    # Other processes on the machine only ever add time: the fastest rounds are the least disturbed
    # (timeit's rule), and many short alternating rounds give both sides the same chances.
    on, off = min(times["on"]), min(times["off"])
    paired = statistics.median(x / y for x, y in zip(times["on"], times["off"]))
    print(f"in-process produce path, batch 1, groups of {group:>2}: fastest round {on:.2f} us/request with "
          f"metrics, {off:.2f} without: cost {on / off - 1:.1%} (median of paired rounds: {paired - 1:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--processors", type=int, default=2)
    parser.add_argument("--window", type=int, default=16, help="produce requests in flight")
    parser.add_argument("--bootstrap", default=None, metavar="HOST:PORT",
                        help="measure a running broker instead of starting one (topics bench-1, bench-50)")
    parser.add_argument("--metrics-cost", action="store_true", help="produce with metrics on vs off, interleaved")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per side with --metrics-cost")
    args = parser.parse_args()
    if args.metrics_cost:
        metrics_cost_in_process(args.rounds * 20, 1_024, 1)
        metrics_cost_in_process(args.rounds * 20, 1_024, args.window)
        metrics_cost(args.processors, args.records, args.rounds, args.window)
        return
    with contextlib.nullcontext(None) if args.bootstrap else EmbeddedBroker(processors=args.processors) as broker:
        host, port = (args.bootstrap or broker.bootstrap).rsplit(":", 1)
        conn = BrokerConnection(host, int(port))
        rows = []
        for per_batch, records in ((1, args.records // 10), (50, args.records)):
            topic = f"bench-{per_batch}"
            conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": topic}]))
            elapsed = bench_produce(conn, topic, records, per_batch, args.window)
            rows.append((f"produce batch {per_batch}", records, records * RECORD, elapsed))
        elapsed, nbytes = bench_consume(conn, "bench-50", args.records)
        rows.append(("consume (1 MiB fetches)", args.records, nbytes, elapsed))
        conn.close()
    ceiling = sendfile_ceiling(rows[-1][2])
    rows.append(("ceiling: loopback sendfile", 0, rows[-1][2], ceiling))
    print(f"{'test':<28}{'records':>10}{'msg/s':>12}{'MB/s':>10}{'x ceiling':>11}")
    ceiling_rate = rows[-1][2] / ceiling
    for name, records, nbytes, elapsed in rows:
        rate = nbytes / elapsed
        msgs = f"{records / elapsed:,.0f}" if records else "-"
        print(f"{name:<28}{records:>10,}{msgs:>12}{rate / 1e6:>10.1f}{rate / ceiling_rate:>11.3f}")


if __name__ == "__main__":
    main()
