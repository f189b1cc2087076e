"""DescribeLogDirs (35): this broker's log dirs and the bytes of each partition in them
(kafka-log-dirs.sh, KafkaAdminClient.describe_log_dirs).

Read from the directories themselves (a partition's size is the sum of its segment
files), so a processor answers without opening partitions; a dir gone offline
answers KAFKA_STORAGE_ERROR without being touched. mmlog has no future replicas
(no moves between dirs), so offset_lag is 0 and is_future_key false.
"""

import os

from mmlog.log.files import LOG_SUFFIX
from mmlog.protocol.messages import describe_log_dirs as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
KAFKA_STORAGE_ERROR = 56


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.DESCRIBE):
        return schema.RESPONSE(throttle_time_ms=0, results=[])  # Kafka's answer before v3: nothing
    wanted = None if request.body.topics is None else {
        (t.topic, p) for t in request.body.topics for p in t.partitions}
    manager = ctx.manager
    topics = manager.topics()
    results = []
    for slot, log_dir in enumerate(manager.log_dirs):
        if manager.dir_health.offline(slot):
            results.append({"error_code": KAFKA_STORAGE_ERROR, "log_dir": str(log_dir), "topics": []})
            continue
        sizes = _sizes(log_dir, topics, wanted)
        if sizes is None:
            results.append({"error_code": KAFKA_STORAGE_ERROR, "log_dir": str(log_dir), "topics": []})
            continue
        by_topic: dict[str, list] = {}
        for (topic, p), size in sorted(sizes.items()):
            by_topic.setdefault(topic, []).append({"partition_index": p, "partition_size": size, "offset_lag": 0,
                                                   "is_future_key": False})
        results.append({"error_code": 0, "log_dir": str(log_dir),
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return schema.RESPONSE(throttle_time_ms=0, results=results)


def _sizes(log_dir, topics, wanted) -> dict | None:
    """{(topic, partition): bytes of its segments} of the partitions in log_dir; None if it cannot be read."""
    out = {}
    try:
        for entry in os.scandir(log_dir):
            topic, _, number = entry.name.rpartition("-")
            if not (entry.is_dir() and number.isdigit() and topic in topics):
                continue
            key = (topic, int(number))
            if wanted is not None and key not in wanted:
                continue
            out[key] = sum(f.stat().st_size for f in os.scandir(entry.path) if f.name.endswith(LOG_SUFFIX))
    except OSError:
        return None
    return out
