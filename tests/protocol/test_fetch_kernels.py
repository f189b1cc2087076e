"""The Fetch kernels against the codec: generated requests decode to the codec's fields, truncated and
corrupted frames are never accepted where the codec refuses them, and a response written around its records
is the codec's frame (encode_response_parts with a placeholder per records field) once the records are in."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from mmlog.protocol import (Placeholder, ProtocolError, RequestHeader, decode_request_body, encode_request,
                            encode_response_parts, is_supported, parse_request_header)
from mmlog.protocol import fetch_kernels as f
from mmlog.protocol import produce_kernels as pk
from mmlog.protocol.messages import fetch

VERSIONS = range(f.MIN_VERSION, f.MAX_VERSION + 1)
MAX_PARTS = 64
PAD = 5


@pytest.fixture(scope="module", autouse=True)
def compiled():
    f.warm()


def test_the_kernels_serve_exactly_the_versions_the_broker_serves():
    assert [v for v in range(-1, 20) if is_supported(fetch.API_KEY, v)] == list(VERSIONS)


def _name(rng: random.Random) -> str:
    return rng.choice(["t", "orders", "tøpic", "x" * 249, "".join(rng.choice("abc._-") for _ in range(8))])


def random_request(rng: random.Random, empty_topics: bool = False, forgotten: bool = False) -> bytes:
    """A request frame without its size prefix, from the codec, with random everything."""
    version = rng.choice(VERSIONS)
    topics = [{"topic": _name(rng), "partitions": [
        {"partition": rng.randint(-1, 2**31 - 1), "current_leader_epoch": rng.choice([-1, 0, rng.randrange(2**31)]),
         "fetch_offset": rng.choice([-1, 0, rng.randrange(2**63)]), "log_start_offset": rng.choice([-1, 0, 77]),
         "partition_max_bytes": rng.randint(-2**31, 2**31 - 1)}
        for _ in range(rng.randint(0 if empty_topics else 1, 5))]} for _ in range(rng.randint(0, 5))]
    body = fetch.REQUEST(
        replica_id=rng.choice([-1, 0, 3]), max_wait_ms=rng.randint(-5, 60000), min_bytes=rng.randint(-1, 2**20),
        max_bytes=rng.randint(-2**31, 2**31 - 1), isolation_level=rng.choice([0, 1, -128, 127]),
        session_id=rng.randint(-2**31, 2**31 - 1), session_epoch=rng.randint(-1, 1000), topics=topics,
        forgotten_topics_data=[{"topic": "gone", "partitions": [1, 2]}] if forgotten and rng.random() < 0.5 else [],
        rack_id=rng.choice(["", "rack-1", "stойка"]))
    header = RequestHeader(fetch.API_KEY, version, rng.randint(-2**31, 2**31 - 1),
                           rng.choice([None, "", "consumer-1", "cönsumer"]))
    return bytes(encode_request(header, body))[4:]


def python_decode(frame: bytes):
    try:
        header, offset = parse_request_header(frame)
        body = decode_request_body(header, frame, offset)
    except ProtocolError:
        return None
    fields = (header.api_version, header.correlation_id, header.client_id, body.replica_id, body.max_wait_ms,
              body.min_bytes, body.max_bytes, body.isolation_level, body.session_id, body.session_epoch,
              body.rack_id)
    parts = [(t, topic.topic, p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset,
              p.partition_max_bytes) for t, topic in enumerate(body.topics) for p in topic.partitions]
    return fields, parts, body


def _string(buf, start, n):
    return None if n < 0 else bytes(buf[start:start + n]).decode()


def kernel_decode(frame: bytes, max_parts: int = MAX_PARTS):
    buf = np.frombuffer(bytes([0x11] * PAD) + frame + bytes([0xEE] * PAD), dtype=np.uint8)
    header = np.full(f.FETCH_HEADER_FIELDS, -99, dtype=np.int64)
    parts = np.full((max_parts, f.FETCH_PART_FIELDS), -99, dtype=np.int64)
    n = f.decode_fetch(buf, PAD, PAD + len(frame), header, parts)
    if n < 0:
        return n, None
    h = [int(x) for x in header]
    fields = (h[f.API_VERSION], h[f.CORRELATION_ID], _string(buf, h[f.CLIENT_ID_START], h[f.CLIENT_ID_LEN]),
              h[f.REPLICA_ID], h[f.MAX_WAIT_MS], h[f.MIN_BYTES], h[f.MAX_BYTES], h[f.ISOLATION_LEVEL],
              h[f.SESSION_ID], h[f.SESSION_EPOCH], _string(buf, h[f.RACK_ID_START], h[f.RACK_ID_LEN]))
    rows = [(int(r[f.TOPIC_NUMBER]), _string(buf, r[f.NAME_START], r[f.NAME_LEN]), int(r[f.PARTITION]),
             int(r[f.CURRENT_LEADER_EPOCH]), int(r[f.FETCH_OFFSET]), int(r[f.LOG_START_OFFSET]),
             int(r[f.PARTITION_MAX_BYTES])) for r in parts[:n]]
    return n, (fields, rows)


def check(frame: bytes, max_parts: int = MAX_PARTS) -> int:
    """The strictness rule: accepted only what the codec accepts, with its fields; MALFORMED only what it refuses."""
    n, got = kernel_decode(frame, max_parts)
    expected = python_decode(frame)
    if n >= 0:
        assert expected is not None, f"the kernel accepted a frame the codec refuses: {frame.hex()}"
        assert got == expected[:2]
        assert not expected[2].forgotten_topics_data
    elif n == f.MALFORMED:
        assert expected is None, f"the kernel refused a frame the codec decodes: {frame.hex()}"
    elif n == f.EMPTY_TOPIC:
        assert expected is None or any(not t.partitions for t in expected[2].topics)
    elif n == f.FORGOTTEN_TOPICS:
        assert expected is None or expected[2].forgotten_topics_data
    elif n == f.TOO_MANY_PARTS:
        assert expected is None or len(expected[1]) > max_parts
    elif n == f.UNSUPPORTED_VERSION:
        assert expected is None and not is_supported(fetch.API_KEY, int.from_bytes(frame[2:4], "big", signed=True))
    else:
        assert n == f.NOT_FETCH and frame[:2] != b"\0\1"
    return n


def test_the_shared_layout_is_producess():
    assert (f.API_VERSION, f.CORRELATION_ID, f.CLIENT_ID_START, f.CLIENT_ID_LEN) == (0, 1, 2, 3)
    assert f.NOT_FETCH == pk.NOT_PRODUCE and f.FORGOTTEN_TOPICS not in (pk.MALFORMED, pk.TOO_MANY_PARTS,
                                                                        pk.EMPTY_TOPIC, pk.UNSUPPORTED_VERSION)


def test_generated_requests_decode_to_the_codecs_fields():
    rng = random.Random(11)
    counts = [check(random_request(rng)) for _ in range(1500)]
    assert min(counts) == 0 and max(counts) >= 20


def test_empty_topics_and_forgotten_topics_are_handed_to_python():
    rng = random.Random(12)
    seen = {check(random_request(rng, empty_topics=True, forgotten=True)) for _ in range(600)}
    assert {f.EMPTY_TOPIC, f.FORGOTTEN_TOPICS, 0} <= seen


def test_more_partitions_than_rows_is_too_many_parts():
    rng = random.Random(13)
    for _ in range(200):
        frame = random_request(rng)
        expected = len(python_decode(frame)[1])
        assert check(frame, max_parts=3) == (f.TOO_MANY_PARTS if expected > 3 else expected)


def test_every_truncation_is_refused_or_agrees_with_the_codec():
    rng = random.Random(14)
    for _ in range(12):
        frame = random_request(rng, forgotten=True)
        for length in range(len(frame) + 1):
            check(frame[:length])


def test_random_corruptions_are_refused_or_agree_with_the_codec():
    rng = random.Random(15)
    frames = [random_request(rng, empty_topics=True, forgotten=True) for _ in range(40)]
    codes = set()
    for _ in range(30_000):
        frame = bytearray(rng.choice(frames))
        for _ in range(rng.randint(1, 3)):
            frame[rng.randrange(len(frame))] = rng.choice([0x00, 0xFF, 0x80, 0xC3, 0xED, rng.randrange(256)])
        codes.add(check(bytes(frame)))
    assert {f.MALFORMED, f.UNSUPPORTED_VERSION, f.NOT_FETCH} <= codes and any(c >= 0 for c in codes)


def test_length_fields_set_to_edge_values_are_refused_or_agree_with_the_codec():
    rng = random.Random(16)
    for _ in range(4):
        frame = random_request(rng, forgotten=True)
        for at, width in itertools.product(range(len(frame) - 1), (2, 4)):
            for value in (-2, -1, 0, 1, len(frame) - at, 0x7FFF, -(2**(8 * width - 1))):
                if at + width <= len(frame):
                    check(frame[:at] + value.to_bytes(width, "big", signed=True) + frame[at + width:])


# --- responses ---------------------------------------------------------------------------------------------------

def _filler(i: int, size: int) -> bytes:
    return bytes([(i * 37 + 1) % 256]) * size


def python_frame(version, correlation_id, throttle, error, session, topics, results, aborted) -> bytes:
    """The codec's frame, as the handler has it encoded (records as placeholders), with fillers for the records."""
    entries, txn = [], 0
    for i, ((t, name, index, *_), row) in enumerate(zip(topics, results)):
        code, hw, lso, start, count, size = (int(x) for x in row)
        if not entries or entries[-1][0] != t:
            entries.append((t, {"topic": name, "partitions": []}))
        txns = None if count < 0 else [{"producer_id": int(a[0]), "first_offset": int(a[1])}
                                       for a in aborted[txn:txn + count]]
        txn += max(count, 0)
        entries[-1][1]["partitions"].append({
            "partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": lso,
            "log_start_offset": start, "aborted_transactions": txns, "preferred_read_replica": -1,
            "records": None if size < 0 else Placeholder(size) if size else b""})
    body = fetch.RESPONSE(throttle_time_ms=throttle, error_code=error, session_id=session,
                          responses=[entry for _, entry in entries])
    parts = encode_response_parts(RequestHeader(fetch.API_KEY, version, correlation_id, None), body)
    fillers = iter(_filler(i, int(r[f.RECORDS_SIZE])) for i, r in enumerate(results) if r[f.RECORDS_SIZE] > 0)
    return b"".join(bytes(part) if not isinstance(part, Placeholder) else next(fillers) for part in parts)


def test_responses_are_the_codecs_frames_with_the_records_in_the_gaps():
    rng = random.Random(17)
    for _ in range(1500):
        frame = random_request(rng)
        buf = np.frombuffer(frame, dtype=np.uint8)
        header = np.zeros(f.FETCH_HEADER_FIELDS, dtype=np.int64)
        parts = np.zeros((MAX_PARTS, f.FETCH_PART_FIELDS), dtype=np.int64)
        n = f.decode_fetch(buf, 0, len(buf), header, parts)
        assert n >= 0
        version = int(header[f.API_VERSION])
        results = np.zeros((max(n, 1), f.FETCH_RESULT_FIELDS), dtype=np.int64)
        for i in range(n):
            results[i] = (rng.choice([0, 0, 1, 3, 6, 74, 75, -1]), rng.choice([-1, 0, rng.randrange(2**63)]),
                          rng.choice([-1, 0, rng.randrange(2**40)]), rng.choice([-1, 0, 5]),
                          rng.choice([-1, -1, 0, 0, 1, 3]), rng.choice([-1, 0, 0, 1, 61, 1000, 70000]))
        aborted = np.array([[rng.randrange(2**63), rng.randrange(-1, 2**40)]
                            for _ in range(max(int(results[:n, f.ABORTED_COUNT].clip(0).sum()), 1))], dtype=np.int64)
        correlation_id, throttle = rng.randint(-2**31, 2**31 - 1), rng.choice([0, 0, 250, 2**31 - 1])
        error, session = rng.choice([0, 0, 70]), rng.choice([0, rng.randint(-2**31, 2**31 - 1)])
        out = np.full(8192, 0xAB, dtype=np.uint8)
        gaps = np.full(max(n, 1), -1, dtype=np.int64)
        at = rng.randint(0, 5)
        end = f.encode_fetch_response(out, at, version, correlation_id, throttle, error, session, buf, parts, n,
                                      results, aborted, gaps)
        assert end > at and (out[:at] == 0xAB).all() and (out[end:] == 0xAB).all()
        pieces, last = [], at
        for i in range(n):
            pieces += [bytes(out[last:gaps[i]]), _filler(i, max(int(results[i, f.RECORDS_SIZE]), 0))]
            last = int(gaps[i])
        pieces.append(bytes(out[last:end]))
        whole = b"".join(pieces)
        assert len(whole) == f.fetch_response_size(version, parts, n, results)
        assert whole == python_frame(version, correlation_id, throttle, error, session, python_decode(frame)[1],
                                     results[:n], aborted), (version, n)


def test_a_response_that_does_not_fit_is_minus_one():
    frame = bytes(encode_request(RequestHeader(fetch.API_KEY, 11, 1, "c"), fetch.REQUEST(
        max_wait_ms=1, min_bytes=1, topics=[{"topic": "abc", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                              "partition_max_bytes": 1}]}])))[4:]
    buf = np.frombuffer(frame, dtype=np.uint8)
    header = np.zeros(f.FETCH_HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((4, f.FETCH_PART_FIELDS), dtype=np.int64)
    assert f.decode_fetch(buf, 0, len(buf), header, parts) == 1
    results = np.array([[0, 10, 10, 0, -1, 5000]], dtype=np.int64)
    aborted, gaps = np.zeros((1, 2), dtype=np.int64), np.zeros(1, dtype=np.int64)
    written = f.fetch_response_size(11, parts, 1, results) - 5000
    for room in range(written):
        assert f.encode_fetch_response(np.zeros(room, np.uint8), 0, 11, 1, 0, 0, 0, buf, parts, 1, results,
                                       aborted, gaps) == -1
    assert f.encode_fetch_response(np.zeros(written, np.uint8), 0, 11, 1, 0, 0, 0, buf, parts, 1, results,
                                   aborted, gaps) == written
    assert f.encode_fetch_response(np.zeros(written, np.uint8), 0, 12, 1, 0, 0, 0, buf, parts, 1, results,
                                   aborted, gaps) < 0
