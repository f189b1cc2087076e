"""mmlog's Producer with idempotence (the default with acks="all"): stamped batches, and retries that never
duplicate, against real brokers whose processors are killed under it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import pytest

from mmlog.client.producer import Producer
from mmlog.protocol.records import iter_batches
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from tests.client.test_producer import fetch_all, topic_name
from mmlog.testing.wait import wait_for


def stored_headers(broker, topic):
    with connect(broker) as conn:
        data = bytes(fetch_one(conn, topic, 0, 0).records)
    return [h for _, h in iter_batches(data)]


def test_idempotence_is_the_default_with_acks_all_and_refused_where_kafka_refuses_it():
    assert Producer("127.0.0.1:1").idempotent
    assert not Producer("127.0.0.1:1", acks=1).idempotent
    with pytest.raises(ValueError, match="acks='all'"):
        Producer("127.0.0.1:1", acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="max_in_flight <= 5"):
        Producer("127.0.0.1:1", max_in_flight=6, enable_idempotence=True)


def test_batches_carry_one_producer_id_and_dense_sequences(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=1) as broker:
        topic = topic_name("stamped")
        with Producer(broker.bootstrap, linger_ms=1, max_batch_records=7) as producer:
            for i in range(50):
                producer.send(topic, b"%d" % i, partition=0)
            producer.send_many(topic, [b"bulk-%d" % i for i in range(40)], partition=0).result(10)
        headers = stored_headers(broker, topic)
    assert {h.producer_id for h in headers} == {headers[0].producer_id} and headers[0].producer_id >= 0
    expected = 0
    for h in headers:
        assert h.base_sequence == expected
        expected += h.records_count


def test_retries_after_killed_processors_store_every_record_once_in_order(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=2) as broker:
        topic = topic_name("retried")
        acked, failed = [], []
        stop = threading.Event()

        def run():
            with Producer(broker.bootstrap, linger_ms=1, retries=50, retry_backoff_ms=50,
                          request_timeout_ms=5000) as producer:
                i = 0
                while not stop.is_set():
                    futures = [(b"v-%d" % (i + k), producer.send(topic, b"v-%d" % (i + k), partition=0))
                               for k in range(50)]
                    i += 50
                    for value, future in futures:
                        try:
                            future.result(30)
                            acked.append(value)
                        except Exception as exc:  # noqa: BLE001 - counted, and the test fails on any
                            failed.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            for _ in range(5):
                time.sleep(0.6)
                victim = broker.processor_pids()[0]
                os.kill(victim, signal.SIGKILL)
                wait_for(lambda: victim not in broker.processor_pids() and len(broker.processor_pids()) >= 2,
                         what="the victim replaced", show=broker.processor_pids)
            time.sleep(0.6)
        finally:
            stop.set()
            thread.join(60)
        stored = [r.value for r in fetch_all(broker.bootstrap, topic, 0)]
    assert not failed, failed[:3]
    assert len(acked) > 500
    assert not [v for v, n in Counter(stored).items() if n > 1], "duplicates"
    assert set(acked) <= set(stored)
    numbers = [int(v.split(b"-")[1]) for v in stored]
    assert numbers == sorted(numbers)
