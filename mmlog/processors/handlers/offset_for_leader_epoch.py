"""OffsetForLeaderEpoch (23): one leader epoch per partition, so its end offset is the high watermark.

Clients only ask this after a seek to a position carrying an epoch (Metadata
reports epoch -1, which turns the usual validation off); answering epoch 0 with
the high watermark tells them the position is valid.
"""

from mmlog.processors.handlers._common import error_code
from mmlog.protocol.messages import offset_for_leader_epoch as schema

API_KEY = schema.API_KEY


def handle(ctx, request):
    topics = []
    for topic in request.body.topics:
        results = []
        for part in topic.partitions:
            entry = {"error_code": 0, "partition": part.partition, "leader_epoch": 0, "end_offset": -1}
            try:
                entry["end_offset"] = ctx.manager.partition(topic.topic, part.partition).high_watermark
            except Exception as exc:  # noqa: BLE001
                entry["error_code"] = error_code(exc)
                entry["leader_epoch"] = -1
            results.append(entry)
        topics.append({"topic": topic.topic, "partitions": results})
    return schema.RESPONSE(throttle_time_ms=0, topics=topics)
