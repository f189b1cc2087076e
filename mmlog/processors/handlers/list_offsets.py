"""ListOffsets (2): earliest (-2), latest (-1) or first offset at a timestamp, per partition (DESCRIBE topic).

Latest is the high watermark, or under isolation_level 1 (read_committed, v2+) the last
stable offset: where a read_committed consumer's reads end (Kafka's ListOffsets). Only
the leader answers, fenced by current_leader_epoch as a fetch is (a follower's high
watermark lags the leader's); replica id -2, Kafka's debugging id, may ask any replica."""

from mmlog.processors.handlers._common import check_leader, error_code
from mmlog.protocol.messages import list_offsets as schema
from mmlog.security import acls
from mmlog.errors import TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
READ_COMMITTED = 1
LATEST = -1
EARLIEST = -2
DEBUGGING_REPLICA = -2  # reads a follower's offsets too (Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID)


def handle(ctx: HandlerContext, request):
    committed = request.body.isolation_level == READ_COMMITTED
    any_replica = request.body.replica_id == DEBUGGING_REPLICA
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
                if not any_replica:
                    check_leader(log, part.current_leader_epoch)
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
