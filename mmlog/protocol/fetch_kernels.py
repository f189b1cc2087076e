"""Fetch (key 1) requests, v4-v11, decoded by a numba kernel, and their responses encoded around the records.

The compiled request path's Fetch codec, beside produce_kernels.py (whose refusal codes it shares:
any negative answer means "hand the frame to the Python path"); the codec (messages/fetch.py) stays
the reference, and tests/protocol/test_fetch_kernels.py proves the kernels against it.

A request frame (no size prefix), request header v1 and a non-flexible body::

    api_key int16 (1), api_version int16, correlation_id int32, client_id nullable string
    replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32, isolation_level int8,
    session_id int32, session_epoch int32                                       (v7+)
    topics int32 count, each: topic string, partitions int32 count, each:
        partition int32, current_leader_epoch int32 (v9+), fetch_offset int64,
        log_start_offset int64 (v5+), partition_max_bytes int32
    forgotten_topics_data int32 count (v7+; the kernel takes only an empty one)
    rack_id string                                                               (v11)

Fields a version lacks get the codec's defaults (session_id 0, session_epoch -1, current_leader_epoch
-1, log_start_offset -1, rack_id empty). Bytes after the body are ignored, as the codec ignores them.

The response: int32 size, correlation_id int32 (response header v0), then::

    throttle_time_ms int32, error_code int16 (v7+), session_id int32 (v7+),
    responses int32 count, each: topic string, partitions int32 count, each:
        partition_index int32, error_code int16, high_watermark int64, last_stable_offset int64,
        log_start_offset int64 (v5+), aborted_transactions nullable array (int32 count, -1 null;
        each producer_id int64, first_offset int64), preferred_read_replica int32 (v11: -1),
        records nullable bytes: int32 length, then the bytes

`encode_fetch_response` writes all of it but the records' bytes: out holds the frame with a gap before
each partition's records, their sizes counted in the size prefix; `gaps[i]` is where partition i's
records go. A caller sends out[pos:gaps[0]], the first records (sendfile), out[gaps[0]:gaps[1]], ...
and out[gaps[n-1]:end], which is the codec's frame byte for byte (`encode_response_parts` with a
placeholder per records field).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .messages import fetch as schema
from .produce_kernels import (  # noqa: F401 - the header's first indexes are Produce's, named here too
    API_VERSION, CLIENT_ID_LEN, CLIENT_ID_START, CORRELATION_ID, EMPTY_TOPIC, MALFORMED, NAME_LEN, NAME_START,
    NOT_THIS_API, TOO_MANY_PARTS, TOPIC_NUMBER, UNSUPPORTED_VERSION, read_request_header)
from .wire_kernels import be_i32, be_i64, put_i16, put_i32, put_i64, put_topic, read_string

MIN_VERSION, MAX_VERSION = schema.REQUEST.versions
assert not any(schema.REQUEST.is_flexible(v) for v in range(MIN_VERSION, MAX_VERSION + 1)), \
    "the kernels read the non-flexible layout only"

# header: API_VERSION, CORRELATION_ID, CLIENT_ID_START, CLIENT_ID_LEN as for Produce (indexes 0-3), then:
REPLICA_ID, MAX_WAIT_MS, MIN_BYTES, MAX_BYTES, ISOLATION_LEVEL = 4, 5, 6, 7, 8
SESSION_ID, SESSION_EPOCH, RACK_ID_START, RACK_ID_LEN = 9, 10, 11, 12
FETCH_HEADER_FIELDS = 13

# parts: one row per partition, in request order; TOPIC_NUMBER, NAME_START, NAME_LEN as for Produce (0-2).
PARTITION, CURRENT_LEADER_EPOCH, FETCH_OFFSET, LOG_START_OFFSET, PARTITION_MAX_BYTES = 3, 4, 5, 6, 7
FETCH_PART_FIELDS = 8

# results: one row per partition. RECORDS_SIZE -1: null records. ABORTED_COUNT -1: null
# aborted_transactions, else that many rows of `aborted` (PRODUCER_ID, FIRST_OFFSET), taken in order.
ERROR_CODE, HIGH_WATERMARK, LAST_STABLE_OFFSET, RESULT_LOG_START_OFFSET, ABORTED_COUNT, RECORDS_SIZE = range(6)
FETCH_RESULT_FIELDS = 6
PRODUCER_ID, FIRST_OFFSET = 0, 1

# decode_fetch's refusals: those of produce_kernels, and
NOT_FETCH = NOT_THIS_API  # api key is not 1
FORGOTTEN_TOPICS = -6  # valid, but forgotten_topics_data (a fetch session's) is not empty


@njit(cache=True, nogil=True)
def decode_fetch(buf, start, end, header, parts):
    """Decode the Fetch request frame buf[start:end] (no size prefix) into header and parts.

    Returns the number of partitions, or a refusal (NOT_FETCH, UNSUPPORTED_VERSION, MALFORMED,
    TOO_MANY_PARTS, EMPTY_TOPIC, FORGOTTEN_TOPICS); header and parts hold nothing useful then."""
    p = read_request_header(buf, start, end, schema.API_KEY, MIN_VERSION, MAX_VERSION, header)
    if p < 0:
        return p
    version = header[API_VERSION]
    fixed = 17 + (8 if version >= 7 else 0)  # through isolation_level; the session's id and epoch
    if p + fixed + 4 > end:  # and the topic count
        return MALFORMED
    header[REPLICA_ID] = be_i32(buf, p)
    header[MAX_WAIT_MS] = be_i32(buf, p + 4)
    header[MIN_BYTES] = be_i32(buf, p + 8)
    header[MAX_BYTES] = be_i32(buf, p + 12)
    level = np.int64(buf[p + 16])
    header[ISOLATION_LEVEL] = level - 256 if level >= 128 else level  # int8
    if version >= 7:
        header[SESSION_ID] = be_i32(buf, p + 17)
        header[SESSION_EPOCH] = be_i32(buf, p + 21)
    else:
        header[SESSION_ID], header[SESSION_EPOCH] = 0, -1
    p += fixed
    topics = be_i32(buf, p)
    p += 4
    if topics < 0 or topics > end - p:  # the codec's bound: every item takes a byte at least
        return MALFORMED
    size = 16 + (8 if version >= 5 else 0) + (4 if version >= 9 else 0)  # of one partition
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
            if p + size > end:
                return MALFORMED
            if k >= parts.shape[0]:
                return TOO_MANY_PARTS
            parts[k, TOPIC_NUMBER] = t
            parts[k, NAME_START] = name
            parts[k, NAME_LEN] = name_len
            parts[k, PARTITION] = be_i32(buf, p)
            p += 4
            if version >= 9:
                parts[k, CURRENT_LEADER_EPOCH] = be_i32(buf, p)
                p += 4
            else:
                parts[k, CURRENT_LEADER_EPOCH] = -1
            parts[k, FETCH_OFFSET] = be_i64(buf, p)
            p += 8
            if version >= 5:
                parts[k, LOG_START_OFFSET] = be_i64(buf, p)
                p += 8
            else:
                parts[k, LOG_START_OFFSET] = -1
            parts[k, PARTITION_MAX_BYTES] = be_i32(buf, p)
            p += 4
            k += 1
    header[RACK_ID_START], header[RACK_ID_LEN] = 0, 0
    if version >= 7:
        if p + 4 > end:
            return MALFORMED
        forgotten = be_i32(buf, p)
        p += 4
        if forgotten < 0 or forgotten > end - p:
            return MALFORMED
        if forgotten > 0:
            return FORGOTTEN_TOPICS
    if version >= 11:
        s, n, p = read_string(buf, p, end, False)
        if p < 0:
            return MALFORMED
        header[RACK_ID_START], header[RACK_ID_LEN] = s, n
    return k


@njit(cache=True, nogil=True)
def fetch_response_size(version, parts, n, results):
    """Bytes of the whole response frame, size prefix and records included (what its prefix counts,
    plus 4); the bytes encode_fetch_response writes are this less the records'."""
    per_partition = 4 + 2 + 8 + 8 + 4 + 4  # index, error, high watermark, LSO, aborted count, records size
    if version >= 5:
        per_partition += 8  # log_start_offset
    if version >= 11:
        per_partition += 4  # preferred_read_replica
    size = 4 + 4 + 4 + 4  # size, correlation_id, throttle_time_ms, the topic count
    if version >= 7:
        size += 2 + 4  # error_code, session_id
    for i in range(n):
        if i == 0 or parts[i, TOPIC_NUMBER] != parts[i - 1, TOPIC_NUMBER]:
            size += 2 + parts[i, NAME_LEN] + 4  # topic, the partition count
        size += per_partition
        if results[i, ABORTED_COUNT] > 0:
            size += 16 * results[i, ABORTED_COUNT]
        if results[i, RECORDS_SIZE] > 0:
            size += results[i, RECORDS_SIZE]
    return size


@njit(cache=True, nogil=True)
def encode_fetch_response(out, pos, version, correlation_id, throttle_ms, error_code, session_id,
                          buf, parts, n, results, aborted, gaps):
    """Write at out[pos:] the response frame answering the n partitions of `parts` (as decode_fetch
    left them, names read from buf) with `results` and `aborted`, all but the records' bytes; gaps[i]
    is set to where partition i's records go. Returns where the written bytes end, -1 if out has no
    room for them (nothing useful written then), UNSUPPORTED_VERSION for a version not served.

    A run of partitions with one TOPIC_NUMBER is one topic entry, as in the request."""
    if version < MIN_VERSION or version > MAX_VERSION:
        return UNSUPPORTED_VERSION
    size = fetch_response_size(version, parts, n, results)
    written = size
    for i in range(n):
        if results[i, RECORDS_SIZE] > 0:
            written -= results[i, RECORDS_SIZE]
    if pos < 0 or pos + written > out.shape[0]:
        return -1
    p = put_i32(out, pos, size - 4)
    p = put_i32(out, p, correlation_id)
    p = put_i32(out, p, throttle_ms)
    if version >= 7:
        p = put_i16(out, p, error_code)
        p = put_i32(out, p, session_id)
    topics_at = p  # the topic count, known at the end
    p += 4
    topics = 0
    count_at = 0  # the current topic's partition count
    count = 0
    txn = 0  # the next row of aborted
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
        p = put_i64(out, p, results[i, HIGH_WATERMARK])
        p = put_i64(out, p, results[i, LAST_STABLE_OFFSET])
        if version >= 5:
            p = put_i64(out, p, results[i, RESULT_LOG_START_OFFSET])
        m = results[i, ABORTED_COUNT]
        p = put_i32(out, p, m if m >= 0 else -1)
        for _ in range(m):
            p = put_i64(out, p, aborted[txn, PRODUCER_ID])
            p = put_i64(out, p, aborted[txn, FIRST_OFFSET])
            txn += 1
        if version >= 11:
            p = put_i32(out, p, -1)  # preferred_read_replica: none (any other makes librdkafka skip records)
        records = results[i, RECORDS_SIZE]
        p = put_i32(out, p, records if records >= 0 else -1)
        gaps[i] = p
    if topics:
        put_i32(out, count_at, count)
    put_i32(out, topics_at, topics)
    return p


def warm() -> None:
    """Compile every kernel now (or load it from the on-disk cache), before any fork."""
    buf = np.zeros(64, dtype=np.uint8)
    header = np.zeros(FETCH_HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((4, FETCH_PART_FIELDS), dtype=np.int64)
    results = np.zeros((4, FETCH_RESULT_FIELDS), dtype=np.int64)
    aborted = np.zeros((4, 2), dtype=np.int64)
    decode_fetch(buf, 0, 64, header, parts)
    encode_fetch_response(buf, 0, MIN_VERSION, 0, 0, 0, 0, buf, parts, 0, results, aborted, np.zeros(4, np.int64))
