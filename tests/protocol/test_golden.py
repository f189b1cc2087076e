"""Whole frames built by hand from the Kafka protocol guide, decoded and re-encoded."""

import struct

import pytest

from mmlog.protocol import (Placeholder, RequestHeader, UnsupportedVersionError, api_versions_body,
                            decode_request, decode_response, encode_request, encode_response,
                            encode_response_parts, encode_unsupported_api_versions,
                            parse_request_header, parts_size, supported_versions)
from mmlog.protocol.messages import api_versions, fetch, metadata, produce


def framed(hex_body: str) -> bytes:
    body = bytes.fromhex(hex_body)
    return struct.pack(">i", len(body)) + body


def s16(text: str) -> str:
    """Hex of a classic string: int16 length then UTF-8."""
    data = text.encode()
    return struct.pack(">h", len(data)).hex() + data.hex()


def compact(text: str) -> str:
    """Hex of a compact string shorter than 127 bytes: length+1 in one byte."""
    data = text.encode()
    return bytes([len(data) + 1]).hex() + data.hex()


# --- requests ----------------------------------------------------------------------------

# ApiVersions v3 as librdkafka 2.0.2 sends it first: request header v2, compact body.
API_VERSIONS_V3 = framed(
    "0012" "0003" "00000001" + s16("rdkafka") + "00"  # header v2: key, version, id, client, tags
    + compact("librdkafka") + compact("2.0.2") + "00")  # body: name, version, tags

# Metadata v1 with null topics (all topics), header v1.
METADATA_V1_ALL = framed("0003" "0001" "00000002" + s16("kafka-python") + "ffffffff")

RECORDS = bytes(range(70))  # opaque to the codec: a record batch in real life

# Produce v7, acks=-1, one topic, one partition, one records blob.
PRODUCE_V7 = framed(
    "0000" "0007" "00000003" + s16("producer-1")
    + "ffff"  # transactional_id: null
    + "ffff"  # acks: -1
    + "00007530"  # timeout_ms: 30000
    + "00000001" + s16("events")  # one topic
    + "00000001" "00000002"  # one partition: index 2
    + "00000046" + RECORDS.hex())  # records: int32 length 70


def test_api_versions_v3_request_as_librdkafka_sends_it():
    header, body = decode_request(API_VERSIONS_V3[4:])
    assert header == RequestHeader(18, 3, 1, "rdkafka")
    assert (body.client_software_name, body.client_software_version) == ("librdkafka", "2.0.2")
    assert encode_request(header, body) == API_VERSIONS_V3


def test_metadata_v1_request_with_null_topics():
    header, body = decode_request(METADATA_V1_ALL[4:])
    assert header == RequestHeader(3, 1, 2, "kafka-python")
    assert body.topics is None
    assert encode_request(header, metadata.REQUEST(topics=None)) == METADATA_V1_ALL


def test_produce_v7_request():
    header, body = decode_request(PRODUCE_V7[4:])
    assert header == RequestHeader(0, 7, 3, "producer-1")
    assert (body.transactional_id, body.acks, body.timeout_ms) == (None, -1, 30000)
    [topic] = body.topic_data
    [partition] = topic.partition_data
    assert (topic.name, partition.index) == ("events", 2)
    assert isinstance(partition.records, memoryview) and partition.records == RECORDS
    assert encode_request(header, body) == PRODUCE_V7


def test_produce_records_are_a_view_into_the_frame():
    frame = bytearray(PRODUCE_V7[4:])
    _, body = decode_request(frame)
    records = body.topic_data[0].partition_data[0].records
    assert records.obj is frame  # the broker can patch base offsets in place


def test_a_request_for_an_unsupported_version_carries_its_header():
    frame = framed("0003" "000d" "00000004" + s16("c") + "00" "01")[4:]  # Metadata v13
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header == RequestHeader(3, 13, 4, "c")


# Request frames (size prefix removed) captured on 127.0.0.1 from real clients talking to
# this codec: kcat 1.7.1 (librdkafka 2.0.2), confluent-kafka 2.16.1 (librdkafka 2.16.0)
# and kafka-python 3.0.12, each getting our ApiVersions answer and going on to Metadata.
CAPTURED = [
    ("kcat", "0012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200",
     RequestHeader(18, 3, 1, "rdkafka"),
     {"client_software_name": "librdkafka", "client_software_version": "2.0.2"}),
    ("kcat", "0003000400000002000772646b61666b610000000000",
     RequestHeader(3, 4, 2, "rdkafka"), {"topics": [], "allow_auto_topic_creation": False}),
    ("kcat", "0003000400000003000772646b61666b61ffffffff01",
     RequestHeader(3, 4, 3, "rdkafka"), {"topics": None, "allow_auto_topic_creation": True}),
    ("confluent-kafka", "0012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d"
     "707974686f6e16322e31362e312d72646b61666b612d322e31362e3000",
     RequestHeader(18, 3, 1, "rdkafka"),
     {"client_software_name": "confluent-kafka-python",
      "client_software_version": "2.16.1-rdkafka-2.16.0"}),
    ("confluent-kafka", "0003000800000003000772646b61666b61ffffffff010000",
     RequestHeader(3, 8, 3, "rdkafka"),
     {"topics": None, "allow_auto_topic_creation": True,
      "include_cluster_authorized_operations": False,
      "include_topic_authorized_operations": False}),
    ("kafka-python", "001200030000000200136b61666b612d707974686f6e2d332e302e3132000d6b61666b61"
     "2d707974686f6e07332e302e313200",
     RequestHeader(18, 3, 2, "kafka-python-3.0.12"),
     {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}),
    ("kafka-python", "000300080000000300136b61666b612d707974686f6e2d332e302e313200000000010000",
     RequestHeader(3, 8, 3, "kafka-python-3.0.12"),
     {"topics": [], "allow_auto_topic_creation": True}),
]


@pytest.mark.parametrize("client, hex_frame, expected_header, expected_fields", CAPTURED,
                         ids=[f"{c[0]}-{c[2].api_key}v{c[2].api_version}" for c in CAPTURED])
def test_frames_captured_from_real_clients(client, hex_frame, expected_header, expected_fields):
    frame = bytes.fromhex(hex_frame)
    header, body = decode_request(frame)
    assert header == expected_header
    assert {name: getattr(body, name) for name in expected_fields} == expected_fields
    assert encode_request(header, body)[4:] == frame


def test_kafka_python_opens_with_api_versions_v4_which_we_answer_with_error_35():
    frame = bytes.fromhex("001200040000000100136b61666b612d707974686f6e2d332e302e3132000d6b61666b"
                          "612d707974686f6e07332e302e313200")
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.header == RequestHeader(18, 4, 1, "kafka-python-3.0.12")
    assert encode_unsupported_api_versions(info.value.header)[4:] == bytes.fromhex(
        "00000001" "0023" "00000001" "0012" "0000" "0003")


# --- responses --------------------------------------------------------------------------

def test_api_versions_v3_response_uses_header_v0():
    header = RequestHeader(18, 3, 1, "rdkafka")
    frame = encode_response(header, api_versions_body())
    entries = "".join(struct.pack(">hhh", *v).hex() + "00" for v in supported_versions())
    expected = framed("00000001"  # header v0: correlation id, no tag section
                      "0000"  # error_code
                      + bytes([len(supported_versions()) + 1]).hex() + entries  # compact array
                      + "00000000"  # throttle_time_ms
                      + "00")  # tag section (no features)
    assert frame == expected
    correlation_id, body = decode_response(18, 3, frame[4:])
    assert correlation_id == 1
    advertised = [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]
    assert advertised == supported_versions()


def test_api_versions_v0_response():
    body = api_versions.RESPONSE(error_code=0, api_keys=[{"api_key": 18, "min_version": 0,
                                                          "max_version": 3}])
    assert encode_response(RequestHeader(18, 0, 5), body) == framed(
        "00000005" "0000" "00000001" "0012" "0000" "0003")


def test_unsupported_api_versions_is_answered_in_the_v0_layout():
    """An ApiVersions above ours, as Kafka answers it: error 35, an int32 array of only {18, 0, max}, no throttle."""
    request = framed("0012" "0004" "0000000b" + s16("kafka-python") + "00"
                     + compact("kafka-python") + compact("3.0.12") + "00")
    header, _ = parse_request_header(request[4:])
    assert encode_unsupported_api_versions(header) == framed(
        "0000000b" "0023" "00000001" "0012" "0000" "0003")


def test_produce_v8_response_puts_throttle_time_last():
    body = produce.RESPONSE(throttle_time_ms=9, responses=[{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_start_offset": 0}]}])
    assert encode_response(RequestHeader(0, 8, 6), body) == framed(
        "00000006"
        "00000001" + s16("t") + "00000001"
        "00000000" "0000" "000000000000002a"  # index, error_code, base_offset
        "ffffffffffffffff" "0000000000000000"  # log_append_time_ms -1, log_start_offset
        "00000000" "ffff"  # record_errors [], error_message null
        "00000009")  # throttle_time_ms


def test_fetch_v11_response_in_parts_around_file_ranges():
    """Records come from files by sendfile: everything else is encoded around them."""
    body = fetch.RESPONSE(responses=[{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 10, "last_stable_offset": 10,
         "log_start_offset": 0, "records": Placeholder(300, ("segment-0", 0))},
        {"partition_index": 1, "high_watermark": 0, "last_stable_offset": 0,
         "log_start_offset": 0, "records": b""},
    ]}])
    parts = encode_response_parts(RequestHeader(1, 11, 8), body)
    partition_tail = "00000000" "ffffffff"  # aborted_transactions [], preferred_read_replica -1
    assert len(parts) == 3 and parts[1].payload == ("segment-0", 0)
    assert parts[0].hex() == (
        struct.pack(">i", parts_size(parts) - 4).hex()
        + "00000008"  # correlation id
        + "00000000" "0000" "00000000"  # throttle, error_code, session_id
        + "00000001" + s16("t") + "00000002"
        + "00000000" "0000" "000000000000000a" "000000000000000a" "0000000000000000"
        + partition_tail + "0000012c")  # records length 300, then the file range
    assert parts[2].hex() == (
        "00000001" "0000" "0000000000000000" "0000000000000000" "0000000000000000"
        + partition_tail + "00000000")
    assert parts_size(parts) == len(parts[0]) + 300 + len(parts[2])
