"""OffsetCommit (8): forwarded to the group coordinator, answered once the offsets are stored.

assign() consumers commit with generation -1 and no member id; the coordinator
accepts that while the group has no members, as Kafka does. retention_time_ms
(v2-4) is ignored: `offsets.retention.minutes` decides, as in Kafka 2.1+.
"""

from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward, member_args
from mmlog.protocol.messages import offset_commit as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    body = request.body
    topics = [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                        for p in t.partitions]) for t in body.topics]
    args = member_args(request, 7, topics=topics)
    return forward(ctx, request, "offset_commit", args,
                   lambda value: schema.RESPONSE(throttle_time_ms=0, **value),
                   lambda: {"topics": [{"name": t, "partitions": [
                       {"partition_index": p[0], "error_code": COORDINATOR_NOT_AVAILABLE} for p in ps]}
                       for t, ps in topics]})
