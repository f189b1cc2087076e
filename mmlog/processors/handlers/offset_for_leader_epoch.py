"""OffsetForLeaderEpoch (23): where a leader epoch ended, from the leader's epoch cache.

A returning follower (or a deposed leader) asks the leader for the end offset of
its own latest epoch and truncates what lies beyond (KIP-101/279, see
`Partition.truncate_to_leader_epoch`); clients ask to validate a position. The
answer is the largest epoch <= the one asked and the offset where the next one
began (the log end for the current epoch), by Kafka's rules (`log/leader_epochs.py`).
Only the leader answers, fenced by current_leader_epoch like a fetch.
"""

from mmlog.processors.handlers._common import check_leader, error_code
from mmlog.protocol.messages import offset_for_leader_epoch as schema
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed, TopicAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    topics = []
    denied, refusal = _denied(ctx, request)
    for topic in request.body.topics:
        results = []
        for part in topic.partitions:
            entry = {"error_code": 0, "partition": part.partition, "leader_epoch": -1, "end_offset": -1}
            try:
                if topic.topic in denied:
                    raise refusal(f"not authorized for topic {topic.topic!r}")
                log = ctx.manager.partition(topic.topic, part.partition)
                check_leader(log, part.current_leader_epoch)
                entry["leader_epoch"], entry["end_offset"] = log.end_offset_for_epoch(part.leader_epoch)
            except Exception as exc:  # noqa: BLE001
                entry["error_code"] = error_code(exc)
            results.append(entry)
        topics.append({"topic": topic.topic, "partitions": results})
    return schema.RESPONSE(throttle_time_ms=0, topics=topics)


def _denied(ctx: HandlerContext, request) -> tuple[set, type]:
    """Kafka's rule: a consumer's request (v3+, no replica id) needs DESCRIBE on each topic; a follower's, or
    any before v3 (an inter-broker API then), CLUSTER_ACTION on the cluster."""
    authorizer, names = ctx.authorizer, {t.topic for t in request.body.topics}
    if request.version >= 3 and request.body.replica_id < 0:
        return authorizer.denied(request.conn, acls.DESCRIBE, acls.TOPIC, names), TopicAuthorizationFailed
    return (set() if authorizer.cluster(request.conn, acls.CLUSTER_ACTION) else names), ClusterAuthorizationFailed
