"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch.

Kafka: OffsetForLeaderEpochRequest.json / OffsetForLeaderEpochResponse.json
(valid 2-4, flexible 4+). librdkafka validates positions with exactly v2.
"""

from ..schema import Field, Message

API_KEY = 23
VERSIONS = "2-3"
FLEXIBLE = "4+"

REQUEST = Message("OffsetForLeaderEpochRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("replica_id", "int32", "3+", default=-2),
    Field("topics", "[]OffsetForLeaderTopic", "0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]OffsetForLeaderPartition", "0+", fields=[
            Field("partition", "int32", "0+"),
            Field("current_leader_epoch", "int32", "2+", default=-1),
            Field("leader_epoch", "int32", "0+"),
        ]),
    ]),
])

RESPONSE = Message("OffsetForLeaderEpochResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "2+"),
    Field("topics", "[]OffsetForLeaderTopicResult", "0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]EpochEndOffset", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("partition", "int32", "0+"),
            Field("leader_epoch", "int32", "1+", default=-1),
            Field("end_offset", "int64", "0+", default=-1),
        ]),
    ]),
])
