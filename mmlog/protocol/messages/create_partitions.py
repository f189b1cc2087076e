"""CreatePartitions (key 37): grow a topic to a new partition count.

Kafka: CreatePartitionsRequest.json / CreatePartitionsResponse.json (valid 0-3, flexible 2+).
"""

from ..schema import Field, Message

API_KEY = 37
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("CreatePartitionsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("topics", "[]CreatePartitionsTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("count", "int32", "0+"),
        Field("assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=[
            Field("broker_ids", "[]int32", "0+"),
        ]),
    ]),
    Field("timeout_ms", "int32", "0+"),
    Field("validate_only", "bool", "0+"),
])

RESPONSE = Message("CreatePartitionsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results", "[]CreatePartitionsTopicResult", "0+", fields=[
        Field("name", "string", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
    ]),
])
