"""Fetch (1): file slices of every requested partition, long-polled until min_bytes.

Every requested partition is answered, in request order, even when empty
(kafka-python rejects a sessionless response whose partitions differ from the
request). Each partition's records are a `FileSlice` that the codec leaves as a
placeholder and the connection sends with os.sendfile. The first batch of the
first partition with data is always whole (KIP-74); after that, partitions stop
at partition_max_bytes and the response at max_bytes, possibly mid-batch, which
clients accept. high watermark = last stable offset (no transactions), preferred
read replica -1 (any other value makes librdkafka skip the records).

With less than min_bytes available the request parks in the purgatory until an
append anywhere on the broker wakes it or max_wait_ms passes.
"""

from __future__ import annotations

import time

from mmlog.processors.handlers._common import error_code
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import fetch as schema

API_KEY = schema.API_KEY
WITH_FILES = True  # responses carry FileSlices: encode as parts, send with sendfile


def handle(ctx, request):
    body = request.body
    response, available, failed = read(ctx, body)
    if available >= body.min_bytes or body.max_wait_ms <= 0 or failed:
        return response
    deadline = time.monotonic() + body.max_wait_ms / 1000
    ctx.purgatory.park(request, deadline, lambda: _retry(ctx, request), lambda: _respond_now(ctx, request))
    return DEFERRED


def _retry(ctx, request) -> bool:
    """Called when woken: answer if min_bytes are now there (True), else stay parked."""
    response, available, failed = read(ctx, request.body)
    if available >= request.body.min_bytes or failed:
        request.respond(response, with_files=True)
        return True
    return False


def _respond_now(ctx, request) -> None:
    """max_wait_ms passed: answer with whatever there is."""
    response, _, _ = read(ctx, request.body)
    request.respond(response, with_files=True)


def read(ctx, body) -> tuple[object, int, bool]:
    """Read every requested partition; return (response, bytes available, any error)."""
    remaining = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
    first_with_data = True
    available = 0
    failed = False
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            entry = _empty(part.partition)
            try:
                log = ctx.manager.partition(topic.topic, part.partition)
                limit = min(part.partition_max_bytes, remaining)
                result = log.read(part.fetch_offset, max(limit, 0))
                records = result.slice
                if records.size and (records.size > limit and not first_with_data or remaining <= 0):
                    records = None  # only the first partition with data may exceed its limit
                entry.update(
                    high_watermark=result.high_watermark, last_stable_offset=result.high_watermark,
                    log_start_offset=result.log_start_offset,
                )
                if records is not None and records.size:
                    entry["records"] = records
                    remaining -= records.size
                    available += records.size
                    first_with_data = False
            except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                entry["error_code"] = error_code(exc)
                failed = True
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    response = schema.RESPONSE(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return response, available, failed


def _empty(partition: int) -> dict:
    return {
        "partition_index": partition, "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
        "log_start_offset": -1, "aborted_transactions": [], "preferred_read_replica": -1, "records": b"",
    }
