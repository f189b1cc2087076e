"""Soak: librdkafka's idempotent producer against a broker whose processors are SIGKILLed, round after round.

    python tools/soak_kills.py --rounds 60 [--kills 6] [--interval 0.7] [--processors 2]

A round starts a fresh broker (EmbeddedBroker, loopback, temp dir), produces unique
values to one partition as fast as confluent-kafka takes them (enable.idempotence,
acks=all, linger 2 ms) while `--kills` processors are SIGKILLed `--interval` s apart
(the supervisor replaces each), then flushes and reads the partition back. A round
passes when every delivery succeeded, no value is stored twice, every acknowledged
value is stored, and the values are in the producer's order. A stall (no delivery for
`STALL_S`) is counted apart: it is how a broker that holds a request without answering
shows. Each failed round prints the broker's log tail and librdkafka's (eos, protocol,
broker debug); the summary line is what docs/robustness.md records.

tests/interop/test_idempotence.py runs one round (`produce_through_kills`, `problems`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC = "idempotent"
STALL_S = 4.0  # no delivery for this long after the kills: a stalled round


class ClientLog(logging.Handler):
    """librdkafka's log lines (its `logger` setting), the last `keep` kept."""

    def __init__(self, keep: int = 400) -> None:
        super().__init__()
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self.logger = logging.getLogger(f"librdkafka-{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if " WAKEUP " not in line and "queued but broker not up" not in line:  # a flush logs these every 200 ms
            self.lines.append(f"{record.created:.3f} {line}")

    def tail(self, n: int = 150) -> str:
        return "\n".join(list(self.lines)[-n:])


@dataclasses.dataclass
class Round:
    acked: list[bytes]
    failed: list
    stored: list[bytes]
    longest_quiet_s: float  # the longest time without a delivery, from the first kill to the end
    seconds: float
    client_log: ClientLog


def produce_through_kills(broker, kills: int = 6, interval: float = 0.7) -> Round:
    """Produce while `kills` of the broker's processors are SIGKILLed, `interval` s apart; flush, read back."""
    import confluent_kafka

    from mmlog.testing.connections import connect, read_all

    client_log = ClientLog()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
        "message.timeout.ms": 60_000, "retry.backoff.ms": 50, "debug": "eos,protocol,broker",
        "logger": client_log.logger})
    acked: list[bytes] = []
    failed: list = []
    stop = threading.Event()
    last_delivery = [time.monotonic()]
    quiet = [0.0]
    watching = threading.Event()

    def deliver(err, msg):  # a failed delivery ends a quiet spell too: a stall shows as the gap before it
        (failed if err else acked).append(err or msg.value())
        now = time.monotonic()
        if watching.is_set():
            quiet[0] = max(quiet[0], now - last_delivery[0])
        last_delivery[0] = now

    def run():
        i = 0
        while not stop.is_set():
            for _ in range(20):
                producer.produce(TOPIC, b"value-%d" % i, partition=0, on_delivery=deliver)
                i += 1
            producer.poll(0.002)
        producer.flush(60)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(kills):
            time.sleep(interval)
            watching.set()
            before = broker.processor_pids()
            os.kill(before[0], signal.SIGKILL)
            deadline = time.monotonic() + 20
            while before[0] in broker.processor_pids() or len(broker.processor_pids()) < len(before):
                if time.monotonic() > deadline:
                    raise RuntimeError("the killed processor was not replaced within 20 s")
                time.sleep(0.05)
        time.sleep(interval)
    finally:
        stop.set()
        thread.join(90)
    with connect(broker) as conn:
        stored = [r.value for r in read_all(conn, TOPIC)]
    return Round(acked, failed, stored, quiet[0], time.monotonic() - started, client_log)


def problems(result: Round) -> list[str]:
    """What an exactly-once producer must not see: failed deliveries, duplicates, losses, reordering."""
    found = []
    if result.failed:
        found.append(f"{len(result.failed)} deliveries failed ({len(result.acked)} acknowledged): {result.failed[:3]}")
    copies = collections.Counter(result.stored)
    repeated = [v for v, n in copies.items() if n > 1]
    if repeated:
        found.append(f"{len(repeated)} values stored twice, the first {repeated[:3]}")
    missing = set(result.acked) - set(copies)
    if missing:
        found.append(f"{len(missing)} acknowledged values missing, e.g. {sorted(missing)[:3]}")
    order = [int(v.split(b"-")[1]) for v in result.stored]
    if order != sorted(order):
        found.append("values out of the producer's order")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--kills", type=int, default=6, help="processors SIGKILLed a round")
    parser.add_argument("--interval", type=float, default=0.7, help="seconds between kills")
    parser.add_argument("--processors", type=int, default=2)
    args = parser.parse_args(argv)
    from mmlog.testing import EmbeddedBroker

    failed_rounds = stalls = 0
    acked = 0
    started = time.monotonic()
    for n in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="soak-kills-") as scratch:
            with EmbeddedBroker(Path(scratch) / "broker", processors=args.processors) as broker:
                result = produce_through_kills(broker, args.kills, args.interval)
                found = problems(result)
                stalled = result.longest_quiet_s >= STALL_S
                stalls += stalled
                failed_rounds += bool(found)
                acked += len(result.acked)
                print(f"round {n}: {len(result.acked):,} acknowledged in {result.seconds:.1f} s, longest without a "
                      f"delivery {result.longest_quiet_s:.2f} s{' (STALL)' if stalled else ''}: "
                      f"{'; '.join(found) or 'exactly once'}", flush=True)
                if found or stalled:
                    print("broker log:\n" + "\n".join(broker.log_lines[-30:]))
                    print("librdkafka:\n" + result.client_log.tail())
    print(f"{args.rounds} rounds of {args.kills} processor kills ({args.processors} processors), "
          f"{acked:,} records acknowledged, in {time.monotonic() - started:.0f} s: {failed_rounds} rounds failed, "
          f"{stalls} stalled")
    return 1 if failed_rounds or stalls else 0


if __name__ == "__main__":
    sys.exit(main())
