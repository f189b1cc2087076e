"""Idempotent producers for real: librdkafka with enable.idempotence through processor kills, and a raw replay."""

from __future__ import annotations

import collections
import logging
import os
import signal
import threading
import time

import confluent_kafka

from mmlog.protocol.messages import init_producer_id, metadata
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from tests.processors.test_bad_input import connect, produce_one
from tests.processors.test_concurrent_producers import read_all


def test_a_replayed_batch_gets_its_original_offset_and_is_stored_once(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "replayed"}]))  # auto-created
        ids = conn.request(init_producer_id.API_KEY, 1, init_producer_id.REQUEST(
            transactional_id=None, transaction_timeout_ms=60000))
        batch = build_batch([(None, b"once")], producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                            base_sequence=0)
        produce_one(conn, "replayed", 0, build_batch([(None, b"before")]))
        first = produce_one(conn, "replayed", 0, bytearray(batch))
        again = produce_one(conn, "replayed", 0, bytearray(batch))
        gap = produce_one(conn, "replayed", 0, build_batch(
            [(None, b"gap")], producer_id=ids.producer_id, producer_epoch=ids.producer_epoch, base_sequence=5))
        values = [r.value for r in read_all(conn, "replayed")]
    assert (first.error_code, again.error_code) == (0, 0)
    assert first.base_offset == again.base_offset == 1
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert values == [b"before", b"once"]


class ClientLog(logging.Handler):
    """librdkafka's log lines (its `logger` setting), the last few hundred kept."""

    def __init__(self, keep: int = 300) -> None:
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


def test_librdkafka_with_idempotence_loses_and_repeats_nothing_while_processors_are_killed(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=2) as broker:
        client_log = ClientLog()  # librdkafka's idempotence and request log, the tail shown should a delivery fail
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60_000, "retry.backoff.ms": 50, "debug": "eos,protocol,broker",
            "logger": client_log.logger})
        acked: list[bytes] = []
        failed: list = []
        stop = threading.Event()

        def deliver(err, msg):
            (failed if err else acked).append(err or msg.value())

        def run():
            i = 0
            while not stop.is_set():
                for _ in range(20):
                    producer.produce("idempotent", b"value-%d" % i, partition=0, on_delivery=deliver)
                    i += 1
                producer.poll(0.002)
            producer.flush(60)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            for _ in range(6):
                time.sleep(0.7)
                before = broker.processor_pids()
                os.kill(before[0], signal.SIGKILL)
                deadline = time.monotonic() + 20
                while before[0] in broker.processor_pids() or len(broker.processor_pids()) < 2:
                    assert time.monotonic() < deadline, "the killed processor was not replaced"
                    time.sleep(0.05)
            time.sleep(0.7)
        finally:
            stop.set()
            thread.join(90)
        with connect(broker) as conn:
            stored = [r.value for r in read_all(conn, "idempotent")]
        log_tail = "\n".join(broker.log_lines[-40:])  # what the broker saw, should a delivery have failed
    assert not failed, (f"{len(failed)} failed, {len(acked)} acknowledged: {failed[:3]}\n{log_tail}\n"
                        f"librdkafka:\n{client_log.tail()}")
    copies = collections.Counter(stored)
    assert len(acked) > 1000
    assert not [v for v, n in copies.items() if n > 1], "duplicates in the log"
    assert set(acked) <= set(copies), "acknowledged records missing"
    order = [int(v.split(b"-")[1]) for v in stored]
    assert order == sorted(order), "records out of the producer's order"
