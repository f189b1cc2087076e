"""A compacted topic written in transactions, on a real broker with its cleaner process: mmlog's
transactional Producer and librdkafka's (confluent-kafka) commit and abort, the cleaner compacts the
committed records, drops the aborted ones and, past delete.retention.ms, the markers; read_committed
and read_uncommitted consumers and both producers carry on as if nothing had happened."""

from __future__ import annotations

import json
import time

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from mmlog.client.producer import Producer
from mmlog.log.cleaner.cleaner import STATUS_FILE
from mmlog.protocol import records as rec
from mmlog.testing import EmbeddedBroker
from tests.interop.test_compaction import create, read_confluent

TOPIC = "txn-changelog"
RETENTION_MS = 1500
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": str(RETENTION_MS), "min.compaction.lag.ms": "0"}
BROKER_CONFIG = {"log.cleaner.backoff.ms": 100, "transaction.state.log.num.partitions": 2}
KEYS = 6


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=2, config=BROKER_CONFIG) as b:
        yield b


class Writers:
    """Both transactional producers, and what they committed: key -> (value, offset)."""

    def __init__(self, bootstrap: str) -> None:
        self.mm = Producer(bootstrap, transactional_id="mm-writer", linger_ms=1)
        self.ck = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-writer",
                                            "linger.ms": 1})
        self.mm.init_transactions(timeout=20)
        self.ck.init_transactions(20)
        self.committed: dict[bytes, tuple[bytes, int]] = {}
        self.aborted: set[bytes] = set()
        self.transactions = 0

    def round(self, r: int, commit: bool) -> None:
        """One transaction of each producer over the same keys (each its own key space)."""
        tag = b"c" if commit else b"a"
        values = {b"mm-%d" % k: b"%s-mm-%d-%d" % (tag, k, r) + b"." * 80 for k in range(KEYS)}
        self.mm.begin_transaction()
        futures = {key: self.mm.send(TOPIC, value, key, partition=0) for key, value in values.items()}
        ck_values = {b"ck-%d" % k: b"%s-ck-%d-%d" % (tag, k, r) + b"." * 80 for k in range(KEYS)}
        ck_offsets: dict[bytes, int] = {}
        self.ck.begin_transaction()
        for key, value in ck_values.items():
            self.ck.produce(TOPIC, value, key, partition=0,
                            on_delivery=lambda err, msg: ck_offsets.__setitem__(msg.key(), msg.offset()))
        if commit:
            self.mm.commit_transaction(timeout=20)
            self.ck.commit_transaction(20)
            for key, value in values.items():
                self.committed[key] = (value, futures[key].result(10).offset)
            for key, value in ck_values.items():
                self.committed[key] = (value, ck_offsets[key])
        else:
            self.mm.abort_transaction(timeout=20)
            # the records written before the abort (librdkafka purges unsent ones, and an abort racing its
            # AddPartitionsToTxn gets INVALID_TXN_STATE from mmlog's coordinator: see the report)
            assert self.ck.flush(10) == 0
            self.ck.abort_transaction(20)
            self.aborted |= set(values.values()) | set(ck_values.values())
        self.transactions += 2

    def close(self) -> None:
        self.mm.close(timeout=5)
        assert self.ck.flush(10) == 0


def watermarks(bootstrap: str, isolation: str) -> tuple[int, int]:
    """(low, high) as a consumer of `isolation` is answered (high: the LSO or the high watermark)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"marks-{isolation}",
                                  "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
    finally:
        c.close()


def status(broker) -> dict:
    try:
        return json.loads((broker.data_dir / STATUS_FILE).read_text()).get(f"{TOPIC}-0", {})
    except (OSError, ValueError):
        return {}


def stored(broker) -> list[rec.BatchHeader]:
    """The headers of every batch on disk (read straight from the segment files; read again when the
    cleaner swapped a segment away between the listing and the read)."""
    while True:
        try:
            return [h for path in sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))
                    for _, h in rec.iter_batches(path.read_bytes())]
        except FileNotFoundError:
            continue


def test_transactional_writers_on_a_compacted_topic_keep_the_last_committed_value_of_every_key(broker):
    create(broker.bootstrap, TOPIC, TOPIC_CONFIG)
    w = Writers(broker.bootstrap)
    try:
        for r in range(24):
            w.round(r, commit=r % 4 != 3)
        phase_end = max(offset for _, offset in w.committed.values()) + 2  # past the last markers
        produced_markers = [h.base_offset for h in stored(broker) if h.is_control and h.base_offset < phase_end]
        assert produced_markers  # (the cleaner may have removed some already)
        # The writers go on (a cleaning needs dirty data) until every marker of those transactions is gone:
        # first stamped with a delete horizon once their data is gone, then removed by a cleaning past it.
        deadline = time.monotonic() + 40
        r = 24
        while True:
            w.round(r, commit=True)
            r += 1
            left = [h for h in stored(broker) if h.is_control and h.base_offset < phase_end]
            if not left:
                break
            assert time.monotonic() < deadline, (status(broker), [
                (h.base_offset, h.attributes, h.records_count, h.producer_id, h.base_timestamp) for h in left])
            time.sleep(0.1)
    finally:
        w.close()
    committed = read_confluent(broker.bootstrap, TOPIC, "read_committed")
    uncommitted = read_confluent(broker.bootstrap, TOPIC, "read_uncommitted")
    (c_low, c_high), (u_low, u_high) = watermarks(broker.bootstrap, "read_committed"), \
        watermarks(broker.bootstrap, "read_uncommitted")
    # every key's last committed value, at the offset it was written at, and nothing aborted
    last = {}
    for offset, key, value in committed:
        last[key] = (value, offset)
    assert last == w.committed
    assert not {v for _, _, v in committed} & w.aborted
    offsets = [o for o, _, _ in committed]
    assert offsets == sorted(offsets) and len(committed) < 24 * 2 * KEYS  # compacted, in order
    # aborted records are gone from the cleaned part for read_uncommitted readers too
    first_dirty = status(broker)["first_dirty_offset"]
    assert not [o for o, _, v in uncommitted if v in w.aborted and o < first_dirty]
    # markers of transactions whose data is gone were removed; offsets and watermarks unchanged
    headers = stored(broker)
    last_run = status(broker)["last_run"]  # what `mmlog topics describe` shows
    assert last_run["bytes_read"] > last_run["bytes_written"] > 0
    log_end = headers[-1].last_offset + 1
    assert (c_low, c_high) == (u_low, u_high) == (0, log_end)  # no open transaction: LSO = HW = log end
    # and both producers go on: idempotent sequences and epochs survived the compaction
    w2 = Writers(broker.bootstrap)
    try:
        w2.round(1000, commit=True)
    finally:
        w2.close()
    final = {key: value for _, key, value in read_confluent(broker.bootstrap, TOPIC, "read_committed")}
    assert all(final[key] == value for key, (value, _) in w2.committed.items())
