"""Producers on several connections, spread over both processors, appending to one partition."""

import threading

from mmlog.protocol.messages import metadata
from mmlog.protocol.records import build_batch
from mmlog.testing.connections import connect, read_all
from tests.processors.test_bad_input import produce_one

PRODUCERS = 6
BATCHES = 300


def test_six_connections_appending_to_one_partition_give_dense_offsets_and_lose_nothing(broker):
    with connect(broker) as admin:
        admin.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "contended"}]))
    acked = [[] for _ in range(PRODUCERS)]
    errors = []

    def produce(n):
        try:
            with connect(broker) as conn:
                for i in range(BATCHES):
                    values = [b"p%d-b%d-r%d" % (n, i, j) for j in range(1 + i % 5)]
                    result = produce_one(conn, "contended", 0, build_batch([(None, v) for v in values]))
                    assert result.error_code == 0
                    acked[n].append((result.base_offset, values))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors

    with connect(broker) as conn:
        records = read_all(conn, "contended")
    assert [r.offset for r in records] == list(range(len(records)))  # dense, unique, in order
    by_offset = {r.offset: r.value for r in records}
    for batches in acked:
        for base, values in batches:  # every acknowledged record is where its base offset says
            assert [by_offset[base + j] for j in range(len(values))] == values
    assert len(records) == sum(len(v) for batches in acked for _, v in batches)
