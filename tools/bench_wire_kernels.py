#!/usr/bin/env python3
"""The compiled Produce codec (mmlog/protocol/produce_kernels.py) beside the Python path it replaces.

    python tools/bench_wire_kernels.py [--calls N] [--rounds R]

One Produce v8 request of one partition holding one 200-byte record, acks=1 (what a producer that
awaits each record sends), and its answer. Per call, the fastest of R rounds (other processes only
ever add time), all measured in this one run:

  * decode: the codec (parse_request_header + decode_request_body), the handler's learned
    `RequestShape.read` (its template), `decode_produce` called from Python (numba's dispatch
    included), and `decode_produce` called N times from a compiled loop, as the compiled request
    path calls it (no dispatch);
  * encode: the codec's `encode_response` of the answer body, the handler's `_answer` (its
    one-partition template), `encode_produce_response` from Python and from a compiled loop.

Then the same for a Fetch v11 of one partition (a consumer's long poll) and its answer with 1 MB of
records: the codec's decode and `encode_response_parts` (the records a placeholder, as the handler has
them encoded) beside `decode_fetch` and `encode_fetch_response` (everything but the records).

Prints a table with each figure's ratio to the Python path's fastest (the handler's template where it
has one, else the codec); nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.processors.handlers import produce as handler  # noqa: E402
from mmlog.protocol import (Placeholder, RequestHeader, decode_request_body, encode_request,  # noqa: E402
                            encode_response, encode_response_parts, parse_request_header)
from mmlog.protocol import fetch_kernels as fk  # noqa: E402
from mmlog.protocol import produce_kernels as k  # noqa: E402
from mmlog.protocol.messages import fetch, produce  # noqa: E402
from mmlog.protocol.records import build_batch  # noqa: E402

VERSION = 8


def request_frame() -> bytes:
    """The request, without its size prefix (as a framer hands it over)."""
    body = produce.REQUEST(acks=1, timeout_ms=30000, topic_data=[
        {"name": "bench-topic", "partition_data": [{"index": 0, "records": build_batch([(None, b"x" * 200)])}]}])
    return bytes(encode_request(RequestHeader(produce.API_KEY, VERSION, 1, "bench-request"), body))[4:]


def fetch_frame() -> bytes:
    """A consumer's Fetch v11 of one partition, without its size prefix."""
    body = fetch.REQUEST(max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=0, session_id=0,
                         session_epoch=-1, topics=[{"topic": "bench-topic", "partitions": [
                             {"partition": 0, "current_leader_epoch": 0, "fetch_offset": 123456,
                              "log_start_offset": -1, "partition_max_bytes": 1048576}]}], rack_id="")
    return bytes(encode_request(RequestHeader(fetch.API_KEY, 11, 1, "bench-consumer"), body))[4:]


@njit(cache=True, nogil=True)
def fetch_decode_loop(buf, start, end, header, parts, calls):
    """decode_fetch `calls` times, the correlation id changed each time so that nothing is hoisted."""
    total = 0
    for i in range(calls):
        buf[start + 7] = i & 0xFF
        total += fk.decode_fetch(buf, start, end, header, parts) + header[fk.CORRELATION_ID]
    return total


@njit(cache=True, nogil=True)
def fetch_encode_loop(out, buf, parts, results, aborted, gaps, calls):
    """encode_fetch_response `calls` times with a new correlation id and high watermark each time."""
    total = 0
    for i in range(calls):
        results[0, fk.HIGH_WATERMARK] = i
        total += fk.encode_fetch_response(out, 0, 11, i, 0, 0, 0, buf, parts, 1, results, aborted, gaps) + out[7]
    return total


def measure_fetch(calls: int, rounds: int) -> dict:
    """The Fetch rows."""
    fk.warm()
    frame = fetch_frame()
    view = memoryview(bytearray(frame))
    buf = np.frombuffer(bytearray(frame), dtype=np.uint8)
    header = np.zeros(fk.FETCH_HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((16, fk.FETCH_PART_FIELDS), dtype=np.int64)
    assert fk.decode_fetch(buf, 0, len(buf), header, parts) == 1

    def codec_decode():
        h, at = parse_request_header(view)
        return decode_request_body(h, view, at)

    reply = RequestHeader(fetch.API_KEY, 11, 1, None)
    records = 1 << 20

    def codec_encode():
        return encode_response_parts(reply, fetch.RESPONSE(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            {"topic": "bench-topic", "partitions": [{
                "partition_index": 0, "error_code": 0, "high_watermark": 200000, "last_stable_offset": 200000,
                "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
                "records": Placeholder(records)}]}]))

    results = np.array([[0, 200000, 200000, 0, -1, records]], dtype=np.int64)
    aborted, gaps = np.zeros((1, 2), dtype=np.int64), np.zeros(1, dtype=np.int64)
    out = np.zeros(4096, dtype=np.uint8)
    fetch_decode_loop(buf, 0, len(buf), header, parts, 1)
    fetch_encode_loop(out, buf, parts, results, aborted, gaps, 1)
    slow = max(1, calls // 10)
    return {
        ("fetch decode", "codec: parse_request_header + decode_request_body"): per_call(codec_decode, slow, rounds),
        ("fetch decode", "decode_fetch, called from Python"): per_call(
            lambda: fk.decode_fetch(buf, 0, len(buf), header, parts), slow, rounds),
        ("fetch decode", "decode_fetch, in a compiled loop"): in_loop(
            lambda n: fetch_decode_loop(buf, 0, len(buf), header, parts, n), calls, rounds),
        ("fetch encode", "codec: encode_response_parts, records a placeholder"): per_call(codec_encode, slow, rounds),
        ("fetch encode", "encode_fetch_response, called from Python"): per_call(
            lambda: fk.encode_fetch_response(out, 0, 11, 1, 0, 0, 0, buf, parts, 1, results, aborted, gaps),
            slow, rounds),
        ("fetch encode", "encode_fetch_response, in a compiled loop"): in_loop(
            lambda n: fetch_encode_loop(out, buf, parts, results, aborted, gaps, n), calls, rounds),
    }


@njit(cache=True, nogil=True)
def decode_loop(buf, start, end, header, parts, calls):
    """decode_produce `calls` times, the correlation id changed each time so that nothing is hoisted."""
    total = 0
    for i in range(calls):
        buf[start + 7] = i & 0xFF
        total += k.decode_produce(buf, start, end, header, parts) + header[k.CORRELATION_ID]
    return total


@njit(cache=True, nogil=True)
def encode_loop(out, version, buf, parts, n, results, calls):
    """encode_produce_response `calls` times with a new correlation id and base offset each time."""
    total = 0
    for i in range(calls):
        results[0, k.BASE_OFFSET] = i
        total += k.encode_produce_response(out, 0, version, i, 0, buf, parts, n, results) + out[7]
    return total


def per_call(fn, calls: int, rounds: int) -> float:
    """The fastest round's µs per call of fn() called `calls` times."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def in_loop(fn, calls: int, rounds: int) -> float:
    """The fastest round's µs per call of a compiled loop fn(calls) making `calls` calls."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn(calls)
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def measure(calls: int = 100_000, rounds: int = 5) -> dict:
    """{(stage, row): µs per call} of every row described above."""
    k.warm()
    frame = request_frame()
    view = memoryview(bytearray(frame))
    buf = np.frombuffer(bytearray(frame), dtype=np.uint8)
    header = np.zeros(k.HEADER_FIELDS, dtype=np.int64)
    parts = np.zeros((16, k.PART_FIELDS), dtype=np.int64)
    assert k.decode_produce(buf, 0, len(buf), header, parts) == 1
    parsed, offset = parse_request_header(view)
    body = decode_request_body(parsed, view, offset)
    shape = handler.RequestShape.learn(parsed, body)
    assert shape is not None and shape.read(view) is not None

    def codec_decode():
        h, at = parse_request_header(view)
        return decode_request_body(h, view, at)

    results = np.zeros((1, k.RESULT_FIELDS), dtype=np.int64)
    out = np.zeros(4096, dtype=np.uint8)
    answer = [("bench-topic", [(0, 0, 12345, 0, None)])]
    answer_body = produce.RESPONSE(responses=[{"name": "bench-topic", "partition_responses": [
        handler._fields(0, 0, 12345, 0)]}])
    reply = RequestHeader(produce.API_KEY, VERSION, 1, None)
    assert bytes(handler._answer(reply, answer)) == bytes(encode_response(reply, answer_body))
    decode_loop(buf, 0, len(buf), header, parts, 1)
    encode_loop(out, VERSION, buf, parts, 1, results, 1)
    slow = max(1, calls // 10)  # the interpreted rows: a tenth of the calls
    return {
        ("decode", "codec: parse_request_header + decode_request_body"): per_call(codec_decode, slow, rounds),
        ("decode", "handler: RequestShape.read (template)"): per_call(lambda: shape.read(view), slow, rounds),
        ("decode", "decode_produce, called from Python"): per_call(
            lambda: k.decode_produce(buf, 0, len(buf), header, parts), slow, rounds),
        ("decode", "decode_produce, in a compiled loop"): in_loop(
            lambda n: decode_loop(buf, 0, len(buf), header, parts, n), calls, rounds),
        ("encode", "codec: encode_response of the body"): per_call(
            lambda: encode_response(reply, answer_body), slow, rounds),
        ("encode", "handler: _answer (template)"): per_call(lambda: handler._answer(reply, answer), slow, rounds),
        ("encode", "encode_produce_response, called from Python"): per_call(
            lambda: k.encode_produce_response(out, 0, VERSION, 1, 0, buf, parts, 1, results), slow, rounds),
        ("encode", "encode_produce_response, in a compiled loop"): in_loop(
            lambda n: encode_loop(out, VERSION, buf, parts, 1, results, n), calls, rounds),
    }


def table(figures: dict) -> str:
    lines = ["| stage | path | µs per call | x faster than Python's fastest |", "|---|---|---:|---:|"]
    for stage in dict.fromkeys(s for s, _ in figures):
        rows = {row: us for (s, row), us in figures.items() if s == stage}
        python = min(us for row, us in rows.items() if row.startswith(("handler", "codec")))
        for row, us in rows.items():
            lines.append(f"| {stage} | {row} | {us:.3f} | {python / us:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="calls per compiled-loop round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"Produce v{VERSION}, one partition, one 200-byte record; Fetch v11, one partition; "
          f"fastest of {args.rounds} rounds")
    print(table({**measure(args.calls, args.rounds), **measure_fetch(args.calls, args.rounds)}))


if __name__ == "__main__":
    main()
