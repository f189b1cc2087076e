"""ListOffsets (key 2): offsets by timestamp (-1 latest, -2 earliest).

Kafka: ListOffsetsRequest.json / ListOffsetsResponse.json (valid 1-11, flexible 6+).
"""

from ..schema import Field, Message

API_KEY = 2
VERSIONS = "1-6"
FLEXIBLE = "6+"

REQUEST = Message("ListOffsetsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("replica_id", "int32", "0+"),
    Field("isolation_level", "int8", "2+"),
    Field("topics", "[]ListOffsetsTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]ListOffsetsPartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("current_leader_epoch", "int32", "4+", default=-1),
            Field("timestamp", "int64", "0+"),
        ]),
    ]),
])

RESPONSE = Message("ListOffsetsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "2+"),
    Field("topics", "[]ListOffsetsTopicResponse", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]ListOffsetsPartitionResponse", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
            Field("timestamp", "int64", "1+", default=-1),
            Field("offset", "int64", "1+", default=-1),
            Field("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
])
