"""Bad input gets the error code a Kafka broker gives, or a closed connection, and harms no one else."""

import os
import socket
import struct
import threading

import pytest

from mmlog.client.connection import ConnectionClosed
from mmlog.processors import dispatch
from mmlog.processors.request import CloseConnection
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import api_versions, fetch, list_offsets, metadata, produce
from mmlog.protocol.records import build_batch
from mmlog.testing.connections import connect, fetch_one
from mmlog.testing.wait import wait_for

CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE, UNSUPPORTED_VERSION = 2, 3, 1, 35
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def produce_request(topic, partition, records, acks=1, transactional_id=None):
    return produce.REQUEST(acks=acks, timeout_ms=5000, transactional_id=transactional_id, topic_data=[
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}])


def produce_one(conn, topic, partition, records, version=8, transactional_id=None):
    body = conn.request(produce.API_KEY, version, produce_request(topic, partition, records,
                                                                  transactional_id=transactional_id))
    return body.responses[0].partition_responses[0]


def assert_closed(conn):
    with pytest.raises(ConnectionClosed):
        conn.receive_frame(timeout=10)


@pytest.fixture
def bystander(broker):
    """A second client producing and consuming the whole time; it must see no error."""
    stop = threading.Event()
    errors = []

    def run():
        try:
            with connect(broker) as conn:
                conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "bystander"}],
                                                                  allow_auto_topic_creation=True))
                offset = 0
                while not stop.is_set():
                    result = produce_one(conn, "bystander", 0, build_batch([(b"k", b"v" * 100)]))
                    assert result.error_code == 0
                    part = fetch_one(conn, "bystander", 0, offset)
                    assert part.error_code == 0 and len(part.records) > 0
                    offset += 1
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    yield
    stop.set()
    thread.join(30)
    assert not errors, errors


def test_random_bytes_close_the_connection(broker, bystander):
    with connect(broker) as conn:
        conn.send_raw(struct.pack(">i", 64) + os.urandom(64))
        assert_closed(conn)


def test_a_truncated_frame_then_eof_is_dropped_quietly(broker, bystander):
    with connect(broker) as conn:
        frame = encode_request(RequestHeader(18, 0, 1, "t"), api_versions.REQUEST())
        conn.send_raw(frame[: len(frame) - 2])
        conn.sock.shutdown(socket.SHUT_WR)
        assert_closed(conn)


@pytest.mark.parametrize("size", [-5, 200 * 1024 * 1024])
def test_an_oversize_or_negative_length_prefix_closes_before_buffering(broker, bystander, size):
    with connect(broker) as conn:
        conn.send_raw(struct.pack(">i", size) + b"\x00" * 16)
        assert_closed(conn)


def test_an_unknown_api_key_closes_the_connection(broker, bystander):
    with connect(broker) as conn:
        conn.send_raw(struct.pack(">ihhi", 10, 999, 0, 7) + b"\x00\x00")
        assert_closed(conn)


def test_an_unsupported_version_of_another_api_closes_the_connection(broker, bystander):
    with connect(broker) as conn:
        conn.send_raw(struct.pack(">ihhi", 10, produce.API_KEY, 99, 7) + b"\x00\x00")
        assert_closed(conn)


@pytest.mark.parametrize("api", [metadata, fetch, list_offsets])
def test_a_body_that_does_not_parse_closes_the_connection_naming_the_api(api):
    """Through the dispatcher itself: over the wire a processor that crashed would close the socket too."""
    body = {metadata: lambda: metadata.REQUEST(topics=[{"name": "t"}]),
            fetch: lambda: fetch.REQUEST(topics=[{"topic": "t", "partitions": [{"partition": 0}]}]),
            list_offsets: lambda: list_offsets.REQUEST(topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]),
            }[api]()
    version = api.REQUEST.max_version
    frame = encode_request(RequestHeader(api.API_KEY, version, 1, "c"), body)
    with pytest.raises(CloseConnection, match=f"malformed {api.__name__.rsplit('.', 1)[-1]} request"):
        dispatch.handle_frame(None, None, memoryview(bytes(frame[4:-3])))  # the body ends early


def test_an_unsupported_api_versions_version_answers_35_in_the_v0_layout(broker, bystander):
    with connect(broker) as conn:
        conn.send_raw(struct.pack(">ihhih", 11, 18, 99, 42, 0) + b"\x00")
        frame = bytes(conn.receive_frame())
        correlation_id, error, count = struct.unpack_from(">ihi", frame)
        assert (correlation_id, error, count) == (42, UNSUPPORTED_VERSION, 1)
        assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 3)
        assert len(frame) == 16  # no throttle field
        # ...and the connection stays usable, as librdkafka needs
        body = conn.request(api_versions.API_KEY, 3, api_versions.REQUEST(
            client_software_name="t", client_software_version="1"))
        assert body.error_code == 0


def test_a_batch_with_a_bad_crc_is_rejected_with_corrupt_message(broker, bystander):
    with connect(broker) as conn:
        batch = build_batch([(b"k", b"hello")])
        batch[-1] ^= 0xFF
        assert produce_one(conn, "bystander", 0, batch).error_code == CORRUPT_MESSAGE


def test_a_batch_with_the_wrong_magic_is_rejected_with_corrupt_message(broker, bystander):
    with connect(broker) as conn:
        batch = build_batch([(b"k", b"hello")])
        batch[16] = 1
        assert produce_one(conn, "bystander", 0, batch).error_code == CORRUPT_MESSAGE


def test_a_batch_whose_length_runs_past_the_records_is_rejected(broker, bystander):
    with connect(broker) as conn:
        batch = build_batch([(b"k", b"hello")])
        struct.pack_into(">i", batch, 8, len(batch) + 100)
        assert produce_one(conn, "bystander", 0, batch).error_code == CORRUPT_MESSAGE


def test_rejected_batches_leave_the_log_untouched(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "untouched"}]))
        assert produce_one(conn, "untouched", 0, build_batch([(None, b"a")])).base_offset == 0
        bad = build_batch([(None, b"b")])
        bad[30] ^= 1
        assert produce_one(conn, "untouched", 0, bad).error_code == CORRUPT_MESSAGE
        assert produce_one(conn, "untouched", 0, build_batch([(None, b"c")])).base_offset == 1


def test_transactional_records_without_a_transactional_id_are_refused_for_every_partition(broker, bystander):
    """Kafka's handleProduceRequest: a request whose records are transactional must name its transactional id,
    or every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) and nothing is appended."""
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "no-txn-id"}]))
        txn = build_batch([(None, b"t")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
        plain = build_batch([(None, b"p")])
        body = conn.request(produce.API_KEY, 8, produce.REQUEST(acks=1, timeout_ms=5000, topic_data=[
            {"name": "no-txn-id", "partition_data": [{"index": 0, "records": plain}, {"index": 0, "records": txn}]},
            {"name": "bystander", "partition_data": [{"index": 0, "records": build_batch([(None, b"b")])}]}]))
        assert [(t.name, p.error_code) for t in body.responses for p in t.partition_responses] == [
            ("no-txn-id", TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ("no-txn-id", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            ("bystander", TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
        assert fetch_one(conn, "no-txn-id", 0, 0).high_watermark == 0
        assert produce_one(conn, "no-txn-id", 0, plain).base_offset == 0


def test_unknown_topic_or_partition(broker, bystander):
    with connect(broker) as conn:
        assert produce_one(conn, "bystander", 7, build_batch([(None, b"x")])).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert fetch_one(conn, "no-such-topic", 0, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        body = conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "never-made"}],
                                                                 allow_auto_topic_creation=False))
        assert body.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_outside_the_log_is_offset_out_of_range(broker, bystander):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "ranges"}]))
        produce_one(conn, "ranges", 0, build_batch([(None, b"x")] * 3))
        assert fetch_one(conn, "ranges", 0, 4).error_code == OFFSET_OUT_OF_RANGE
        assert fetch_one(conn, "ranges", 0, -1).error_code == OFFSET_OUT_OF_RANGE
        at_end = fetch_one(conn, "ranges", 0, 3)
        assert at_end.error_code == 0 and at_end.high_watermark == 3 and len(at_end.records) == 0
        listed = conn.request(list_offsets.API_KEY, 5, list_offsets.REQUEST(replica_id=-1, topics=[
            {"name": "ranges", "partitions": [{"partition_index": 0, "timestamp": -1},
                                               {"partition_index": 0, "timestamp": -2}]}]))
        assert [p.offset for p in listed.topics[0].partitions] == [3, 0]


def test_acks_zero_gets_no_response_and_is_appended(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "acks0"}]))
        conn.send(produce.API_KEY, 8, produce_request("acks0", 0, build_batch([(None, b"x")]), acks=0),
                  expect_response=False)
        wait_for(lambda: fetch_one(conn, "acks0", 0, 0).high_watermark == 1, what="the record appended", interval=0.01)
