"""Idempotent producers for real: librdkafka with enable.idempotence through processor kills, and a raw replay."""

from __future__ import annotations

from mmlog.protocol.messages import init_producer_id, metadata
from mmlog.protocol.records import build_batch
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, read_all
from tests.processors.test_bad_input import produce_one
from tools.soak_kills import problems, produce_through_kills


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


def test_librdkafka_with_idempotence_loses_and_repeats_nothing_while_processors_are_killed(tmp_path):
    """One round of tools/soak_kills.py: six processor kills 0.7 s apart under a producer going flat out."""
    with EmbeddedBroker(tmp_path / "broker", processors=2) as broker:
        result = produce_through_kills(broker)
        log_tail = "\n".join(broker.log_lines[-40:])  # what the broker saw, should a delivery have failed
    assert len(result.acked) > 1000
    assert not problems(result), f"{problems(result)}\n{log_tail}\nlibrdkafka:\n{result.client_log.tail()}"
