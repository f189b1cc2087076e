"""The Metrics page's API: the broker's own counters sampled into the last hour's rates and per-API latency
percentiles."""

from __future__ import annotations

import time

import pytest

from mmlog.client import Producer
from tests.console.secured_console import ConsoleSession, kafka_options, secured_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("metrics") / "data") as broker:
        yield broker


def test_produce_shows_as_bytes_in_and_a_produce_rate_with_its_latency(broker):
    console = ConsoleSession(broker.console_urls[0], "alice")
    producer = Producer(broker.bootstrap, linger_ms=0, **kafka_options("admin"))
    deadline = time.monotonic() + 40
    try:
        while True:
            for _ in range(20):
                producer.send("orders-metrics", value=b"v" * 1000)
            producer.flush(30)
            history = console.get("/metrics/history")
            busy = [s for s in history["samples"] if s["bytes_in"] > 0 and "Produce" in s["apis"]]
            if busy or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        producer.close()
    assert history["interval_s"] == 10
    assert busy, history
    produce = busy[-1]["apis"]["Produce"]
    assert produce["rate"] > 0 and 0 < produce["p50"] <= produce["p99"] <= produce["p99.9"]
    assert all(a["time"] < b["time"] for a, b in zip(history["samples"], history["samples"][1:]))
