"""Produce (key 0) requests and responses, v3-v8, decoded and encoded by numba kernels.

The compiled request path calls these from its own compiled loop, so a Produce is served without
the interpreter; the codec (codec.py, messages/produce.py) stays the reference. The kernels take
exactly what the codec takes and write exactly its bytes (tests/protocol/test_produce_kernels.py
proves both on generated and corrupted frames); any negative answer means "hand the frame to the
Python path", which then accepts it or closes the connection as it always did.

A request frame (its size prefix already taken off), request header v1 and a non-flexible body::

    api_key int16 (0), api_version int16, correlation_id int32,
    client_id         nullable string  (int16 length, -1 null; UTF-8)
    transactional_id  nullable string
    acks int16, timeout_ms int32,
    topic_data        int32 count, each: name string, partition_data int32 count,
                      each: index int32, records nullable bytes (int32 length, -1 null)

Bytes after the body are ignored, as the codec ignores them. `decode_produce` fills `header`
(indexes API_VERSION ... TIMEOUT_MS) and one row of `parts` per partition (TOPIC_NUMBER ...
RECORDS_LEN); every START is a position in `buf`, so names and records are never copied.

The response: int32 size, correlation_id int32 (response header v0), then::

    responses int32 count, each: name string, partition_responses int32 count, each:
        index int32, error_code int16, base_offset int64, log_append_time_ms int64 (-1),
        log_start_offset int64 (v5+), record_errors int32 count 0 (v8+),
        error_message nullable string -1 (v8+)
    throttle_time_ms int32
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .messages import produce as schema
from .wire_kernels import be_i16, be_i32, put_i16, put_i32, put_i64, put_topic, read_string

MIN_VERSION, MAX_VERSION = schema.REQUEST.versions
assert not any(schema.REQUEST.is_flexible(v) for v in range(MIN_VERSION, MAX_VERSION + 1)), \
    "the kernels read the non-flexible layout only"

# header: what decode_produce writes, by index. *_LEN -1: null.
API_VERSION, CORRELATION_ID, CLIENT_ID_START, CLIENT_ID_LEN = 0, 1, 2, 3
TRANSACTIONAL_ID_START, TRANSACTIONAL_ID_LEN, ACKS, TIMEOUT_MS = 4, 5, 6, 7
HEADER_FIELDS = 8

# parts: one row per partition, in request order. TOPIC_NUMBER: 0-based index of its topic entry.
TOPIC_NUMBER, NAME_START, NAME_LEN, PARTITION, RECORDS_START, RECORDS_LEN = 0, 1, 2, 3, 4, 5
PART_FIELDS = 6

# results: one row per partition, what encode_produce_response answers for it.
ERROR_CODE, BASE_OFFSET, LOG_START_OFFSET = 0, 1, 2
RESULT_FIELDS = 3

# decode_produce's refusals (every one means: let the Python path decode the frame)
NOT_THIS_API = -1  # read_request_header: another API's frame
NOT_PRODUCE = NOT_THIS_API  # api key is not 0
UNSUPPORTED_VERSION = -2  # not a version in MIN_VERSION..MAX_VERSION
MALFORMED = -3  # the codec would refuse it too: a field past the end, a bad length, not UTF-8
TOO_MANY_PARTS = -4  # more partitions than parts has rows
EMPTY_TOPIC = -5  # valid, but a topic entry has no partitions: its answer needs its name, which parts lack

# frame_length's answers besides a size
NEED_MORE = -1  # fewer than 4 bytes
BAD_SIZE = -2  # a negative size prefix

_HEADER_SIZE = 8  # api_key, api_version, correlation_id


@njit(cache=True, nogil=True)
def frame_length(buf, start, end):
    """The size prefix at buf[start:start+4]: NEED_MORE if fewer than 4 bytes, BAD_SIZE if negative."""
    if end - start < 4:
        return NEED_MORE
    n = be_i32(buf, start)
    return n if n >= 0 else BAD_SIZE


@njit(cache=True, nogil=True)
def peek_api(buf, start, end):
    """(api_key, api_version) of the request frame at buf[start:end], or (-1, -1) if under 4 bytes."""
    if end - start < 4:
        return -1, -1
    return be_i16(buf, start), be_i16(buf, start + 2)


@njit(cache=True, nogil=True)
def read_request_header(buf, start, end, api_key, min_version, max_version, header):
    """Request header v1 of the frame buf[start:end] into header (API_VERSION, CORRELATION_ID,
    CLIENT_ID_START, CLIENT_ID_LEN): where the body starts, or a refusal (NOT_THIS_API when the frame is
    not api_key's, UNSUPPORTED_VERSION outside min_version..max_version, MALFORMED)."""
    if end - start < _HEADER_SIZE:
        return MALFORMED
    if be_i16(buf, start) != api_key:
        return NOT_THIS_API
    version = be_i16(buf, start + 2)
    if version < min_version or version > max_version:
        return UNSUPPORTED_VERSION
    header[API_VERSION] = version
    header[CORRELATION_ID] = be_i32(buf, start + 4)
    s, n, p = read_string(buf, start + _HEADER_SIZE, end, True)
    if p < 0:
        return MALFORMED
    header[CLIENT_ID_START], header[CLIENT_ID_LEN] = s, n
    return p


@njit(cache=True, nogil=True)
def decode_produce(buf, start, end, header, parts):
    """Decode the Produce request frame buf[start:end] (no size prefix) into header and parts.

    Returns the number of partitions, or a refusal (NOT_PRODUCE, UNSUPPORTED_VERSION, MALFORMED,
    TOO_MANY_PARTS, EMPTY_TOPIC); header and parts hold nothing useful then. An empty topic_data
    is valid: 0."""
    p = read_request_header(buf, start, end, schema.API_KEY, MIN_VERSION, MAX_VERSION, header)
    if p < 0:
        return p
    s, n, p = read_string(buf, p, end, True)
    if p < 0:
        return MALFORMED
    header[TRANSACTIONAL_ID_START], header[TRANSACTIONAL_ID_LEN] = s, n
    if p + 10 > end:  # acks, timeout_ms, the topic count
        return MALFORMED
    header[ACKS] = be_i16(buf, p)
    header[TIMEOUT_MS] = be_i32(buf, p + 2)
    topics = be_i32(buf, p + 6)
    p += 10
    if topics < 0 or topics > end - p:  # the codec's bound: every item takes a byte at least
        return MALFORMED
    k = 0
    for t in range(topics):
        name, name_len, p = read_string(buf, p, end, False)
        if p < 0 or p + 4 > end:
            return MALFORMED
        count = be_i32(buf, p)
        p += 4
        if count < 0 or count > end - p:
            return MALFORMED
        if count == 0:
            return EMPTY_TOPIC
        for _ in range(count):
            if p + 8 > end:  # index, records length
                return MALFORMED
            if k >= parts.shape[0]:
                return TOO_MANY_PARTS
            parts[k, TOPIC_NUMBER] = t
            parts[k, NAME_START] = name
            parts[k, NAME_LEN] = name_len
            parts[k, PARTITION] = be_i32(buf, p)
            size = be_i32(buf, p + 4)
            p += 8
            if size >= 0:
                if p + size > end:
                    return MALFORMED
                parts[k, RECORDS_START] = p
                p += size
            elif size == -1:
                parts[k, RECORDS_START] = p
            else:
                return MALFORMED
            parts[k, RECORDS_LEN] = size
            k += 1
    return k


@njit(cache=True, nogil=True)
def response_size(version, parts, n):
    """Bytes of the whole response frame (size prefix included) encode_produce_response writes."""
    per_partition = 4 + 2 + 8 + 8  # index, error_code, base_offset, log_append_time_ms
    if version >= 5:
        per_partition += 8  # log_start_offset
    if version >= 8:
        per_partition += 4 + 2  # record_errors (empty), error_message (null)
    size = 4 + 4 + 4 + 4  # size, correlation_id, the topic count, throttle_time_ms
    for i in range(n):
        if i == 0 or parts[i, TOPIC_NUMBER] != parts[i - 1, TOPIC_NUMBER]:
            size += 2 + parts[i, NAME_LEN] + 4  # name, the partition count
        size += per_partition
    return size


@njit(cache=True, nogil=True)
def encode_produce_response(out, pos, version, correlation_id, throttle_ms, buf, parts, n, results):
    """Write at out[pos:] the whole response frame answering the n partitions of `parts` (as
    decode_produce left them, names read from buf) with `results`; return where it ends, -1 if
    out has no room for it (UNSUPPORTED_VERSION for a version the codec does not write).

    A run of partitions with one TOPIC_NUMBER is one topic entry, as in the request. The bytes are
    the codec's for these results with no error messages (handlers/produce.py's `_answer`)."""
    if version < MIN_VERSION or version > MAX_VERSION:
        return UNSUPPORTED_VERSION
    size = response_size(version, parts, n)
    if pos < 0 or pos + size > out.shape[0]:
        return -1
    p = put_i32(out, pos, size - 4)
    p = put_i32(out, p, correlation_id)
    topics_at = p  # the topic count, known at the end
    p += 4
    topics = 0
    count_at = 0  # the current topic's partition count
    count = 0
    for i in range(n):
        if i == 0 or parts[i, TOPIC_NUMBER] != parts[i - 1, TOPIC_NUMBER]:
            if topics:
                put_i32(out, count_at, count)
            topics += 1
            p, count_at = put_topic(out, p, buf, parts[i, NAME_START], parts[i, NAME_LEN])
            count = 0
        count += 1
        p = put_i32(out, p, parts[i, PARTITION])
        p = put_i16(out, p, results[i, ERROR_CODE])
        p = put_i64(out, p, results[i, BASE_OFFSET])
        p = put_i64(out, p, -1)  # log_append_time_ms: the log appends with CreateTime
        if version >= 5:
            p = put_i64(out, p, results[i, LOG_START_OFFSET])
        if version >= 8:
            p = put_i32(out, p, 0)  # record_errors: none
            p = put_i16(out, p, -1)  # error_message: null
    if topics:
        put_i32(out, count_at, count)
    put_i32(out, topics_at, topics)
    return put_i32(out, p, throttle_ms)


def warm() -> None:
    """Compile every kernel now (or load it from the on-disk cache), before any fork."""
    buf = np.zeros(64, dtype=np.uint8)
    header = np.zeros(HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((4, PART_FIELDS), dtype=np.int64)
    results = np.zeros((4, RESULT_FIELDS), dtype=np.int64)
    frame_length(buf, 0, 64)
    peek_api(buf, 0, 64)
    decode_produce(buf, 0, 64, header, parts)
    encode_produce_response(buf, 0, MIN_VERSION, 0, 0, buf, parts, 0, results)
