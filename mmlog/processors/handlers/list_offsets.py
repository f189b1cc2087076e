"""ListOffsets (2): earliest (-2), latest (-1) or first offset at a timestamp, per partition (DESCRIBE topic).

Latest is the high watermark, or under isolation_level 1 (read_committed, v2+) the last
stable offset: where a read_committed consumer's reads end (Kafka's ListOffsets)."""

from mmlog.processors.handlers._common import error_code
from mmlog.protocol.messages import list_offsets as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed

API_KEY = schema.API_KEY
READ_COMMITTED = 1
LATEST = -1
EARLIEST = -2


def handle(ctx, request):
    committed = request.body.isolation_level == READ_COMMITTED
    topics = []
    denied = ctx.authorizer.denied(request.conn, acls.DESCRIBE, acls.TOPIC, {t.name for t in request.body.topics})
    for topic in request.body.topics:
        results = []
        for part in topic.partitions:
            entry = {"partition_index": part.partition_index, "error_code": 0, "timestamp": -1, "offset": -1,
                     "leader_epoch": -1}
            try:
                if topic.name in denied:
                    raise TopicAuthorizationFailed(f"not authorized to describe topic {topic.name!r}")
                log = ctx.manager.partition(topic.name, part.partition_index)
                if part.timestamp == LATEST:
                    entry["offset"] = log.last_stable_offset if committed else log.high_watermark
                elif part.timestamp == EARLIEST:
                    entry["offset"] = log.log_start_offset
                else:
                    found = log.lookup_timestamp(part.timestamp)
                    if found is not None:
                        entry["offset"], entry["timestamp"] = found
            except Exception as exc:  # noqa: BLE001 - each partition answers for itself
                entry["error_code"] = error_code(exc)
            results.append(entry)
        topics.append({"name": topic.name, "partitions": results})
    return schema.RESPONSE(throttle_time_ms=0, topics=topics)
