"""An executor's fetcher on its own: exact ranges in small pipelined fetches, a stale leader address, loss."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from mmlog.client import Producer
from mmlog.spark.fetch import DataLoss, RangeFetcher


def fill(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap, acks="all", batch_size=2048) as producer:  # many small batches
        producer.send_many(topic, [b"%06d" % i for i in range(n)], partition=1).result(timeout=30)


def fetched(fetcher: RangeFetcher, start: int, end: int) -> tuple[list[int], list[bytes], int]:
    offsets, values, chunks = [], [], 0
    for arrays in fetcher.chunks(start, end):
        offsets += arrays.offsets.tolist()
        values += arrays.values()
        chunks += 1
    return offsets, values, chunks


def test_a_range_is_read_exactly_in_many_small_fetches(broker, topic):
    fill(broker.bootstrap, topic, 3000)
    fetcher = RangeFetcher(topic, 1, broker.bootstrap, broker.bootstrap, max_bytes=4096)
    offsets, values, chunks = fetched(fetcher, 123, 2777)
    assert offsets == list(range(123, 2777)) and values == [b"%06d" % i for i in range(123, 2777)]
    assert chunks > 10
    assert fetched(fetcher, 5, 5)[0] == []


def test_a_stale_leader_address_falls_back_to_the_bootstrap_metadata(broker, topic):
    fill(broker.bootstrap, topic, 100)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        stale = "127.0.0.1:%d" % closed.getsockname()[1]
    fetcher = RangeFetcher(topic, 1, stale, broker.bootstrap, max_bytes=1 << 20, timeout=10)
    assert fetched(fetcher, 0, 100)[0] == list(range(100))
    assert fetcher.leader == broker.bootstrap


def test_a_range_past_the_log_end_is_data_loss_unless_told_otherwise(broker, topic):
    fill(broker.bootstrap, topic, 50)
    with pytest.raises(DataLoss, match="failOnDataLoss"):
        fetched(RangeFetcher(topic, 1, broker.bootstrap, broker.bootstrap, max_bytes=1 << 20), 40, 80)
    lenient = RangeFetcher(topic, 1, broker.bootstrap, broker.bootstrap, max_bytes=1 << 20, fail_on_data_loss=False)
    offsets = fetched(lenient, 40, 80)[0]
    assert np.array_equal(offsets, np.arange(40, 50))
