"""DeleteRecords (21): move partitions' log start offsets forward, on their leaders.

Each partition's leader moves its log start to the asked offset (-1: the high
watermark), dropping the segments wholly below it at once; reads and ListOffsets
(earliest) honour the new start, and a fetch below it is OFFSET_OUT_OF_RANGE.
Followers take the leader's log start from their Fetch answers, and report theirs
in their next fetch. The answer's low watermark is the smallest log start over the
live replicas (Kafka's lowWatermarkIfLeader): with followers the request parks
until every live one has moved (woken by their fetches), or answers
REQUEST_TIMED_OUT after timeout_ms for the partitions still waiting, as Kafka's
DelayedDeleteRecords does. Errors per partition: OFFSET_OUT_OF_RANGE for an
offset past the high watermark or below -1, NOT_LEADER_OR_FOLLOWER off the
leader, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import time

from mmlog.errors import RequestTimedOut
from mmlog.processors.handlers._common import check_leader, error_code
from mmlog.processors.request import DEFERRED
from mmlog.protocol.messages import delete_records as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
HIGH_WATERMARK = -1


def handle(ctx: HandlerContext, request):
    waiting = []  # (entry, (topic, partition), asked offset): by name, as the processor may close a log meanwhile
    topics = []
    denied = ctx.authorizer.denied(request.conn, acls.DELETE, acls.TOPIC, {t.name for t in request.body.topics})
    for topic in request.body.topics:
        results = []
        for part in topic.partitions:
            entry = {"partition_index": part.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                if topic.name in denied:
                    raise TopicAuthorizationFailed(f"not authorized to delete records of {topic.name!r}")
                log = ctx.manager.partition(topic.name, part.partition_index)
                check_leader(log, -1)
                offset = log.high_watermark if part.offset == HIGH_WATERMARK else part.offset
                log.delete_records_before(offset)
                waiting.append((entry, (topic.name, part.partition_index), offset))
            except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                entry["error_code"] = error_code(exc)
            results.append(entry)
        topics.append({"name": topic.name, "partitions": results})
    response = schema.RESPONSE(throttle_time_ms=0, topics=topics)

    def settle(timed_out: bool = False) -> bool:
        """Fill in the low watermarks reached; True once none is waiting any more."""
        live = ctx.views.current().brokers
        for item in list(waiting):
            entry, key, offset = item
            try:
                low = ctx.manager.partition(*key).low_watermark(live)
            except Exception as exc:  # noqa: BLE001 - deleted, or no longer the leader
                entry["error_code"] = error_code(exc)
                waiting.remove(item)
                continue
            if low >= offset:
                entry["low_watermark"] = low
                waiting.remove(item)
            elif timed_out:
                entry["error_code"] = RequestTimedOut.code
        return not waiting or timed_out

    if settle():
        return response
    ctx.purgatory.park(request, time.monotonic() + request.body.timeout_ms / 1000,
                       lambda: settle() and _respond(request, response),
                       lambda: settle(timed_out=True) and _respond(request, response))
    return DEFERRED


def _respond(request, response) -> bool:
    request.respond(response)
    return True
