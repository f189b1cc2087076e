"""OffsetDelete (key 47): delete a group's committed offsets of some partitions.

Kafka: OffsetDeleteRequest.json / OffsetDeleteResponse.json (valid 0, never flexible).
"""

from ..schema import Field, Message

API_KEY = 47
VERSIONS = "0"
FLEXIBLE = "none"

REQUEST = Message("OffsetDeleteRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("topics", "[]OffsetDeleteRequestTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]OffsetDeleteRequestPartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
        ]),
    ]),
])

RESPONSE = Message("OffsetDeleteResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("error_code", "int16", "0+"),
    Field("throttle_time_ms", "int32", "0+"),
    Field("topics", "[]OffsetDeleteResponseTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]OffsetDeleteResponsePartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ]),
])
