"""Request and response headers: which version each message uses, and their bytes."""

import pytest

from mmlog.protocol.errors import ProtocolError, TruncatedError
from mmlog.protocol.header import (RequestHeader, encode_request_header, encode_response_header,
                                   parse_request_header, parse_response_header, peek_client_id,
                                   request_header_version, request_matcher, response_header_version)

# (api_key, api_version, request header version, response header version)
HEADER_VERSIONS = [
    (18, 0, 1, 0),  # ApiVersions
    (18, 2, 1, 0),
    (18, 3, 2, 0),  # flexible, but the ApiVersions response header stays v0
    (18, 4, 2, 0),  # above our max: still classified by Kafka's flexibleVersions "3+"
    (3, 8, 1, 0),  # Metadata: non-flexible through v8
    (3, 9, 2, 1),  # Metadata v9+ is flexible (we do not speak it, but can read its header)
    (0, 8, 1, 0),  # Produce
    (0, 9, 2, 1),
    (1, 11, 1, 0),  # Fetch
    (1, 12, 2, 1),
    (19, 4, 1, 0),  # CreateTopics
    (19, 5, 2, 1),
    (15, 5, 2, 1),  # DescribeGroups
    (13, 4, 2, 1),  # LeaveGroup
    (16, 3, 2, 1),  # ListGroups
    (7, 0, 0, 0),  # ControlledShutdown v0: the only request header v0
    (999, 0, 1, 0),  # unknown API: no tag section assumed
]


@pytest.mark.parametrize("api_key, api_version, request_version, response_version", HEADER_VERSIONS)
def test_header_version_rule(api_key, api_version, request_version, response_version):
    assert request_header_version(api_key, api_version) == request_version
    assert response_header_version(api_key, api_version) == response_version


# (header, exact bytes)
REQUEST_HEADERS = [
    (RequestHeader(3, 1, 7, "client"), "0003" "0001" "00000007" "0006" "636c69656e74"),
    (RequestHeader(3, 1, 7, None), "0003" "0001" "00000007" "ffff"),
    (RequestHeader(3, 1, -1, ""), "0003" "0001" "ffffffff" "0000"),
    # v2: client_id keeps its int16 length, then an empty tag section
    (RequestHeader(18, 3, 1, "rdkafka"), "0012" "0003" "00000001" "0007" "72646b61666b61" "00"),
    (RequestHeader(7, 0, 2), "0007" "0000" "00000002"),
]


@pytest.mark.parametrize("header, hex_bytes", REQUEST_HEADERS)
def test_request_header_bytes(header, hex_bytes):
    out = bytearray()
    encode_request_header(out, header)
    assert out.hex() == hex_bytes
    parsed, body_offset = parse_request_header(bytes.fromhex(hex_bytes) + b"body")
    assert parsed == header
    assert body_offset == len(out)


def test_header_of_an_unknown_api_parses_up_to_client_id():
    frame = bytes.fromhex("03e7" "0005" "0000002a" "0001" "78") + b"rest"
    header, body_offset = parse_request_header(frame)
    assert header == RequestHeader(999, 5, 42, "x")
    assert body_offset == 11


def test_header_of_an_unsupported_flexible_version_skips_its_tags():
    """kafka-python sends ApiVersions v4 first; we parse the header to answer it."""
    frame = bytes.fromhex("0012" "0004" "00000001" "0002" "6b70"
                          "01" "05" "02" "abcd"  # a tag section with one unknown tag
                          "0b") + b"body"
    header, body_offset = parse_request_header(frame)
    assert header == RequestHeader(18, 4, 1, "kp")
    assert frame[body_offset:] == b"\x0bbody"


@pytest.mark.parametrize("hex_bytes, error", [
    ("", TruncatedError),
    ("0003" "0001" "0000", TruncatedError),
    ("0003" "0001" "00000007", TruncatedError),  # no client_id
    ("0003" "0001" "00000007" "0005" "6162", TruncatedError),
    ("0012" "0003" "00000001" "0000", TruncatedError),  # v2 without its tag section
    ("0003" "0001" "00000007" "fffe", ProtocolError),
])
def test_malformed_request_headers(hex_bytes, error):
    with pytest.raises(error):
        parse_request_header(bytes.fromhex(hex_bytes))


@pytest.mark.parametrize("version, hex_bytes", [(0, "0000002a"), (1, "0000002a00")])
def test_response_header_bytes(version, hex_bytes):
    out = bytearray()
    encode_response_header(out, 42, version)
    assert out.hex() == hex_bytes
    assert parse_response_header(bytes.fromhex(hex_bytes), version) == (42, len(out))


def test_request_matcher_reads_api_key_and_version_from_the_first_four_bytes():
    produce = request_matcher(0, range(3, 10))
    frame = bytearray()
    encode_request_header(frame, RequestHeader(0, 9, 7, "c"))
    assert produce(frame) and produce(memoryview(frame)) and produce(bytes(frame[:4]))
    assert not produce(frame[:3])  # too short to tell
    for key, version in ((0, 2), (0, 10), (1, 9), (256, 9), (0, 0x0109)):
        other = bytearray()
        encode_request_header(other, RequestHeader(key, version, 7, "c"))
        assert not produce(other), (key, version)
    assert request_matcher(0x0102, [5])(bytes([1, 2, 0, 5]))
    assert not request_matcher(0, [300])(bytes([0, 0, 1, 44]))  # versions past 255 are never asked for


def test_peek_client_id_reads_header_v1s_client_id():
    frame = bytearray()
    encode_request_header(frame, RequestHeader(0, 9, 7, "producer-ü"))
    frame += b"body"
    assert peek_client_id(frame) == peek_client_id(memoryview(frame)) == "producer-ü"
    null = bytearray()
    encode_request_header(null, RequestHeader(0, 3, 7, None))
    assert peek_client_id(null) is None
    assert peek_client_id(frame[:9]) is None  # too short to say
    assert peek_client_id(bytes(frame[:10 + 3])) == "pro"  # cut short: what is there
