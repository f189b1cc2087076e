"""OffsetFetch (key 9): read a group's committed positions.

Kafka: OffsetFetchRequest.json / OffsetFetchResponse.json (valid 1-10, flexible 6+).
A null ``topics`` (v2+) asks for every partition of the group. The top-level
``error_code`` (v2+) comes *after* the topics.
"""

from ..schema import Field, Message

API_KEY = 9
VERSIONS = "1-7"
FLEXIBLE = "6+"

REQUEST = Message("OffsetFetchRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0-7"),
    Field("topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=[
        Field("name", "string", "0-7"),
        Field("partition_indexes", "[]int32", "0-7"),
    ]),
    Field("require_stable", "bool", "7+", default=False),
])

RESPONSE = Message("OffsetFetchResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "3+"),
    Field("topics", "[]OffsetFetchResponseTopic", "0-7", fields=[
        Field("name", "string", "0-7"),
        Field("partitions", "[]OffsetFetchResponsePartition", "0-7", fields=[
            Field("partition_index", "int32", "0-7"),
            Field("committed_offset", "int64", "0-7"),
            Field("committed_leader_epoch", "int32", "5-7", default=-1),
            Field("metadata", "string", "0-7", nullable="0-7"),
            Field("error_code", "int16", "0-7"),
        ]),
    ]),
    Field("error_code", "int16", "2-7", default=0),
])
