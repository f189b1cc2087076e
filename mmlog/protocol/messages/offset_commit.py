"""OffsetCommit (key 8): store a group's consumed positions.

Kafka: OffsetCommitRequest.json / OffsetCommitResponse.json (valid 2-10, flexible 8+).
``retention_time_ms`` exists only in v2-4. assign() consumers commit with
generation_id -1 and an empty member_id. (Kafka 4 renamed GenerationId to
GenerationIdOrMemberEpoch; the wire is the same.)
"""

from ..schema import Field, Message

API_KEY = 8
VERSIONS = "2-8"
FLEXIBLE = "8+"

REQUEST = Message("OffsetCommitRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("generation_id", "int32", "1+", default=-1),
    Field("member_id", "string", "1+"),
    Field("group_instance_id", "string", "7+", nullable="7+", default=None),
    Field("retention_time_ms", "int64", "2-4", default=-1),
    Field("topics", "[]OffsetCommitRequestTopic", "0+", fields=[
        Field("name", "string", "0-9"),
        Field("partitions", "[]OffsetCommitRequestPartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("committed_offset", "int64", "0+"),
            Field("committed_leader_epoch", "int32", "6+", default=-1),
            Field("committed_metadata", "string", "0+", nullable="0+"),
        ]),
    ]),
])

RESPONSE = Message("OffsetCommitResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "3+"),
    Field("topics", "[]OffsetCommitResponseTopic", "0+", fields=[
        Field("name", "string", "0-9"),
        Field("partitions", "[]OffsetCommitResponsePartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ]),
])
