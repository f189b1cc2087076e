"""Produce (0): validate and append record batches, per partition.

The records field is a writable view into the request frame: the log rewrites
baseOffset in it and writes those same bytes to the segment, so a batch is never
copied between the socket and the page cache. A batch is validated (length,
magic, CRC-32C) before anything is written; every partition gets its own error.
acks=0 sends no response at all; acks=-1 equals acks=1 with one replica.
"""

from mmlog.errors import InvalidRecord, InvalidRequiredAcks
from mmlog.processors.handlers._common import error_code
from mmlog.processors.request import NO_RESPONSE
from mmlog.protocol.messages import produce as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    body = request.body
    valid_acks = body.acks in (0, 1, -1)
    appended = False
    responses = []
    for topic in body.topic_data:
        results = []
        for part in topic.partition_data:
            if not valid_acks:
                results.append(_result(part.index, InvalidRequiredAcks.code))
                continue
            try:
                info = _append(ctx, topic.name, part)
                results.append(_result(part.index, 0, info.base_offset, info.log_start_offset))
                appended = True
            except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                results.append(_result(part.index, error_code(exc), error_message=str(exc)))
        responses.append({"name": topic.name, "partition_responses": results})
    if appended:
        ctx.appended()
    if body.acks == 0:
        return NO_RESPONSE
    return schema.RESPONSE(responses=responses, throttle_time_ms=0)


def _append(ctx, topic: str, part):
    records = part.records
    if records is None or len(records) == 0:
        raise InvalidRecord("produce request without records")
    log = ctx.manager.partition(topic, part.index)
    return log.append(bytearray(records) if records.readonly else records)


def _result(index, code, base_offset=-1, log_start_offset=-1, error_message=None):
    return {
        "index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": -1,
        "log_start_offset": log_start_offset, "record_errors": [], "error_message": error_message,
    }
