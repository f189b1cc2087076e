"""The Produce kernels against the codec: generated requests decode to the codec's fields, truncated and
corrupted frames are never accepted where the codec refuses them, and responses are the Python path's bytes."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from numba import njit

from mmlog.processors.handlers.produce import _answer
from mmlog.protocol import (ProtocolError, RequestHeader, decode_request_body, encode_request, encode_response,
                            is_supported, parse_request_header)
from mmlog.protocol import produce_kernels as k
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch
from mmlog.protocol.wire_kernels import utf8_valid

VERSIONS = range(k.MIN_VERSION, k.MAX_VERSION + 1)
MAX_PARTS = 64
PAD = 7  # garbage before each frame in the kernel's buffer, and after it: start and end must be honoured


@pytest.fixture(scope="module", autouse=True)
def compiled():
    k.warm()


def test_the_kernels_serve_exactly_the_versions_the_broker_serves():
    assert [v for v in range(-1, 20) if is_supported(produce.API_KEY, v)] == list(VERSIONS)


# --- generating requests ----------------------------------------------------------------------------------------

CLIENT_IDS = [None, "", "producer-1", "prodüçer ✓", "生产者", "\U0001f680 rocket", "a" * 300]


def _text(rng: random.Random) -> str:
    return rng.choice(["t", "orders", "topic.with-dots_and_underscores", "tøpic", "\u20ac", "x" * 249,
                       "".join(rng.choice("abcXYZ019._-") for _ in range(rng.randint(1, 20)))])


def _records(rng: random.Random):
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.3:
        return b""
    return bytes(build_batch([(rng.randbytes(rng.randint(0, 8)) or None, rng.randbytes(rng.randint(0, 40)))
                              for _ in range(rng.randint(1, 3))], base_timestamp=1_800_000_000_000))  # deterministic


def random_request(rng: random.Random, empty_topics: bool = False) -> bytearray:
    """A request frame (size prefix included) from the codec, with random everything."""
    version = rng.choice(VERSIONS)
    topics = [{"name": _text(rng), "partition_data": [{"index": rng.randint(-2, 2**31 - 1), "records": _records(rng)}
                                                      for _ in range(rng.randint(0 if empty_topics else 1, 5))]}
              for _ in range(rng.randint(0, 5))]
    if topics and rng.random() < 0.2:
        topics.append(dict(topics[0]))  # the same topic twice: two entries, answered as two
    body = produce.REQUEST(transactional_id=rng.choice([None, "", "txn-1", "tränsaction"]),
                           acks=rng.choice([-1, 0, 1, 2]), timeout_ms=rng.randint(-2**31, 2**31 - 1),
                           topic_data=topics)
    client_id = rng.choice(CLIENT_IDS)
    return encode_request(RequestHeader(produce.API_KEY, version, rng.randint(-2**31, 2**31 - 1), client_id), body)


# --- both decoders, as comparable values -------------------------------------------------------------------------

def python_decode(frame: bytes):
    """(header fields, [(topic number, name, partition, records)]) as the codec decodes it; None if it refuses."""
    try:
        header, offset = parse_request_header(frame)
        body = decode_request_body(header, frame, offset)
    except ProtocolError:
        return None
    fields = (header.api_version, header.correlation_id, header.client_id, body.transactional_id, body.acks,
              body.timeout_ms)
    parts = [(t, topic.name, p.index, None if p.records is None else bytes(p.records))
             for t, topic in enumerate(body.topic_data) for p in topic.partition_data]
    return fields, parts, len(body.topic_data)


def _string(buf, start, n):
    return None if n < 0 else bytes(buf[start:start + n]).decode()


def kernel_decode(frame: bytes, max_parts: int = MAX_PARTS):
    """(code, the same value as python_decode or None): the frame decoded between garbage bytes."""
    buf = np.frombuffer(bytes([0xA5] * PAD) + frame + bytes([0x5A] * PAD), dtype=np.uint8)
    header = np.full(k.HEADER_FIELDS, -99, dtype=np.int64)
    parts = np.full((max_parts, k.PART_FIELDS), -99, dtype=np.int64)
    n = k.decode_produce(buf, PAD, PAD + len(frame), header, parts)
    if n < 0:
        return n, None
    fields = (int(header[k.API_VERSION]), int(header[k.CORRELATION_ID]),
              _string(buf, header[k.CLIENT_ID_START], header[k.CLIENT_ID_LEN]),
              _string(buf, header[k.TRANSACTIONAL_ID_START], header[k.TRANSACTIONAL_ID_LEN]),
              int(header[k.ACKS]), int(header[k.TIMEOUT_MS]))
    rows = [(int(row[k.TOPIC_NUMBER]), _string(buf, row[k.NAME_START], row[k.NAME_LEN]), int(row[k.PARTITION]),
             None if row[k.RECORDS_LEN] < 0 else bytes(buf[row[k.RECORDS_START]:row[k.RECORDS_START] + row[k.RECORDS_LEN]]))
            for row in parts[:n]]
    return n, (fields, rows)


def check(frame: bytes, max_parts: int = MAX_PARTS) -> int:
    """The strictness rule on one frame: the kernel accepts only what the codec accepts, with its fields, and
    refuses as MALFORMED only what the codec refuses. Returns the kernel's answer."""
    n, got = kernel_decode(frame, max_parts)
    expected = python_decode(frame)
    if n >= 0:
        assert expected is not None, f"the kernel accepted a frame the codec refuses: {frame.hex()}"
        assert got == expected[:2]
        assert n == len(expected[1])
    elif n == k.MALFORMED:
        assert expected is None, f"the kernel refused a frame the codec decodes: {frame.hex()}"
    elif n == k.EMPTY_TOPIC:
        assert expected is None or expected[2] > len({t for t, *_ in expected[1]})  # the rest is not read
    elif n == k.TOO_MANY_PARTS:
        assert expected is None or len(expected[1]) > max_parts
    elif n == k.UNSUPPORTED_VERSION:
        assert expected is None and not is_supported(produce.API_KEY, int.from_bytes(frame[2:4], "big", signed=True))
    else:
        assert n == k.NOT_PRODUCE and frame[:2] != b"\0\0"
    return n


# --- decoding ----------------------------------------------------------------------------------------------------

def test_generated_requests_decode_to_the_codecs_fields():
    rng = random.Random(1)
    codes = []
    for _ in range(1500):
        frame = bytes(random_request(rng))[4:]
        n = check(frame)
        assert n >= 0  # every generated request has partitions in every topic and fits
        codes.append(n)
    assert 0 in codes and max(codes) >= 20  # empty topic_data and big ones both came up


def test_topics_without_partitions_are_handed_to_python_and_an_empty_request_is_zero():
    rng = random.Random(2)
    seen = set()
    for _ in range(500):
        seen.add(check(bytes(random_request(rng, empty_topics=True))[4:]))
    assert k.EMPTY_TOPIC in seen and 0 in seen


def test_more_partitions_than_rows_is_too_many_parts():
    rng = random.Random(3)
    for _ in range(200):
        frame = bytes(random_request(rng))[4:]
        expected = python_decode(frame)
        n = check(frame, max_parts=3)
        assert n == (k.TOO_MANY_PARTS if len(expected[1]) > 3 else len(expected[1]))


def test_every_truncation_is_refused_or_agrees_with_the_codec():
    rng = random.Random(4)
    for _ in range(12):
        frame = bytes(random_request(rng))[4:]
        for length in range(len(frame) + 1):
            check(frame[:length])


def test_random_corruptions_are_refused_or_agree_with_the_codec():
    rng = random.Random(5)
    frames = [bytes(random_request(rng))[4:] for _ in range(40)]
    codes = set()
    for _ in range(30_000):
        frame = bytearray(rng.choice(frames))
        for _ in range(rng.randint(1, 3)):
            # mostly the structure (header, ids, counts, lengths), which lies in the first bytes of these frames
            at = rng.randrange(min(len(frame), 80)) if rng.random() < 0.8 else rng.randrange(len(frame))
            frame[at] = rng.choice([0x00, 0xFF, 0x80, 0xC3, 0xED, 0xF4, rng.randrange(256)])
        codes.add(check(bytes(frame)))
    assert {k.MALFORMED, k.UNSUPPORTED_VERSION, k.NOT_PRODUCE} <= codes and any(c >= 0 for c in codes)


def test_length_fields_set_to_edge_values_are_refused_or_agree_with_the_codec():
    """Every 2- and 4-byte window of a few frames overwritten with the lengths a decoder can trip on."""
    rng = random.Random(6)
    for _ in range(4):
        frame = bytes(random_request(rng))[4:]
        for at, width in itertools.product(range(len(frame) - 1), (2, 4)):
            for value in (-2, -1, 0, 1, len(frame) - at, 0x7FFF, -(2**(8 * width - 1))):
                if at + width <= len(frame):
                    check(frame[:at] + value.to_bytes(width, "big", signed=True) + frame[at + width:])


def test_names_and_ids_that_are_not_utf8_are_refused_like_the_codec_refuses_them():
    header = RequestHeader(produce.API_KEY, 8, 5, "c" * 4)
    body = produce.REQUEST(transactional_id="t" * 4, acks=1, timeout_ms=1,
                           topic_data=[{"name": "n" * 4, "partition_data": [{"index": 0, "records": b"r"}]}])
    frame = bytes(encode_request(header, body))[4:]
    for name in (b"cccc", b"tttt", b"nnnn"):
        at = frame.index(name)
        for bad in (b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\x80", b"\xff"):
            bad = (bad + b"x" * 4)[:4]
            corrupt = frame[:at] + bad + frame[at + 4:]
            assert check(corrupt) == k.MALFORMED


def test_utf8_validation_is_pythons_on_every_short_sequence_of_the_boundary_bytes():
    edges = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED,
             0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
    for length in range(1, 5):
        for seq in itertools.product(edges, repeat=length):
            data = bytes(seq)
            try:
                data.decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                valid = False
            buf = np.frombuffer(data + b"\x80", dtype=np.uint8)  # a continuation byte past the end, not to be read
            assert utf8_valid(buf, 0, length) == valid, data.hex()


# --- the small ones ----------------------------------------------------------------------------------------------

def test_frame_length_and_peek_api():
    buf = np.frombuffer(b"\x00\x00\x01\x02\x00\x00\x00\x08\xff\xff\xff\xfe", dtype=np.uint8)
    assert k.frame_length(buf, 0, 12) == 0x102
    assert k.frame_length(buf, 0, 3) == k.NEED_MORE
    assert k.frame_length(buf, 8, 12) == k.BAD_SIZE
    assert k.peek_api(buf, 4, 12) == (0, 8)
    assert k.peek_api(buf, 8, 12) == (-1, -2)
    assert k.peek_api(buf, 4, 7) == (-1, -1)


# --- responses ---------------------------------------------------------------------------------------------------

def python_response(version: int, correlation_id: int, throttle_ms: int, parts: list, results) -> bytes:
    """The Python path's answer (handlers/produce.py `_answer`, its template or the codec) as bytes."""
    topics = []
    for (t, name, index, _), (error, base, start) in zip(parts, results):
        if not topics or topics[-1][0] != t:
            topics.append((t, name, []))
        topics[-1][2].append((index, error, base, start, None))
    header = RequestHeader(produce.API_KEY, version, correlation_id, None)
    answer = _answer(header, [(name, results) for _, name, results in topics], throttle_ms)
    return bytes(answer if isinstance(answer, bytearray) else encode_response(header, answer))


def _random_results(rng: random.Random, n: int) -> np.ndarray:
    results = np.zeros((max(n, 1), k.RESULT_FIELDS), dtype=np.int64)
    for i in range(n):
        results[i] = (rng.choice([0, 0, 0, 1, 2, 3, 6, 10, 19, 20, 87, -1, 32767, -32768]),
                      rng.choice([-1, 0, 1, rng.randrange(2**63), 2**63 - 1, rng.randrange(2**40)]),
                      rng.choice([-1, 0, rng.randrange(2**63)]))
    return results


def test_responses_are_the_python_paths_bytes_for_every_version():
    rng = random.Random(7)
    shapes = 0
    for i in range(1500):
        frame = bytes(random_request(rng))
        buf = np.frombuffer(frame, dtype=np.uint8)
        header = np.zeros(k.HEADER_FIELDS, dtype=np.int64)
        parts = np.zeros((MAX_PARTS, k.PART_FIELDS), dtype=np.int64)
        n = k.decode_produce(buf, 4, len(buf), header, parts)
        assert n >= 0
        version = int(header[k.API_VERSION])
        for _ in range(2):  # a throttled answer is the codec's; an unthrottled one-partition one the template's
            correlation_id = rng.randint(-2**31, 2**31 - 1)
            throttle = 0 if rng.random() < 0.6 else rng.randint(1, 2**31 - 1)
            results = _random_results(rng, n)
            at = rng.randint(0, 9)
            out = np.full(4096, 0xEE, dtype=np.uint8)
            end = k.encode_produce_response(out, at, version, correlation_id, throttle, buf, parts, n, results)
            expected = python_response(version, correlation_id, throttle, python_decode(frame[4:])[1],
                                       [tuple(int(x) for x in row) for row in results[:n]])
            assert bytes(out[at:end]) == expected, (version, n)
            assert end - at == k.response_size(version, parts, n)
            assert (out[:at] == 0xEE).all() and (out[end:] == 0xEE).all()
            shapes += n == 1 and not throttle
    assert shapes > 50  # the template path was compared, not only the codec's


def test_an_answer_that_does_not_fit_is_minus_one():
    frame = bytes(encode_request(RequestHeader(produce.API_KEY, 8, 9, "c"), produce.REQUEST(
        acks=1, timeout_ms=5, topic_data=[{"name": "abc", "partition_data": [{"index": 1, "records": b"x"}]}])))
    buf = np.frombuffer(frame, dtype=np.uint8)
    header = np.zeros(k.HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((4, k.PART_FIELDS), dtype=np.int64)
    assert k.decode_produce(buf, 4, len(buf), header, parts) == 1
    results = np.zeros((1, k.RESULT_FIELDS), dtype=np.int64)
    size = k.response_size(8, parts, 1)
    for room in range(size):
        assert k.encode_produce_response(np.zeros(room + 3, dtype=np.uint8), 3, 8, 9, 0, buf, parts, 1, results) == -1
    assert k.encode_produce_response(np.zeros(size + 3, dtype=np.uint8), 3, 8, 9, 0, buf, parts, 1, results) == size + 3
    assert k.encode_produce_response(np.zeros(size, dtype=np.uint8), 0, 9, 9, 0, buf, parts, 1, results) < 0


# --- called from compiled code, as the compiled request path calls them ------------------------------------------

@njit(nogil=True)
def _serve_stream(buf, end, out, header, parts, results, offsets):
    """Walk a stream of size-prefixed frames as a processor loop would and answer each Produce in `out` with
    results (0, the next of `offsets`, 0) per partition; return (frames answered, bytes written) or a refusal."""
    pos, written, frames, at = 0, 0, 0, 0
    while True:
        size = k.frame_length(buf, pos, end)
        if size < 0 or pos + 4 + size > end:
            return frames, written
        api, _ = k.peek_api(buf, pos + 4, end)
        if api != 0:
            return -1, written
        n = k.decode_produce(buf, pos + 4, pos + 4 + size, header, parts)
        if n < 0:
            return n, written
        for i in range(n):
            results[i, k.ERROR_CODE], results[i, k.BASE_OFFSET], results[i, k.LOG_START_OFFSET] = 0, offsets[at], 0
            at += 1
        written = k.encode_produce_response(out, written, header[k.API_VERSION], header[k.CORRELATION_ID], 0,
                                             buf, parts, n, results)
        if written < 0:
            return -2, written
        frames += 1
        pos += 4 + size


def test_a_stream_of_frames_served_from_compiled_code_is_answered_as_the_python_path_answers():
    rng = random.Random(8)
    frames = [bytes(random_request(rng)) for _ in range(200)]
    stream = b"".join(frames)
    offsets = np.array([rng.randrange(2**62) for _ in range(200 * 30)], dtype=np.int64)
    buf = np.frombuffer(bytearray(stream + frames[0][:7]), dtype=np.uint8)  # and a partial frame at the end
    out = np.zeros(1 << 20, dtype=np.uint8)
    header = np.zeros(k.HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((MAX_PARTS, k.PART_FIELDS), dtype=np.int64)
    results = np.zeros((MAX_PARTS, k.RESULT_FIELDS), dtype=np.int64)
    answered, written = _serve_stream(buf, len(buf), out, header, parts, results, offsets)
    assert answered == len(frames)
    expected, at = [], 0
    for frame in frames:
        request = python_decode(frame[4:])
        version, correlation_id = request[0][:2]
        results_py = [(0, int(offsets[at + i]), 0) for i in range(len(request[1]))]
        at += len(request[1])
        expected.append(python_response(version, correlation_id, 0, request[1], results_py))
    assert bytes(out[:written]) == b"".join(expected)
