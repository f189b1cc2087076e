"""AlterPartitionReassignments (key 45): move partitions' replicas (KIP-455), or cancel a move.

Kafka: AlterPartitionReassignmentsRequest.json / ...Response.json (valid 0, flexible 0+).
Null replicas cancel the partition's pending reassignment.
"""

from ..schema import Field, Message

API_KEY = 45
VERSIONS = "0"
FLEXIBLE = "0+"

REQUEST = Message("AlterPartitionReassignmentsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("timeout_ms", "int32", "0+", default=60000),
    Field("topics", "[]ReassignableTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]ReassignablePartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("replicas", "[]int32", "0+", nullable="0+", default=None),
        ]),
    ]),
])

RESPONSE = Message("AlterPartitionReassignmentsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("responses", "[]ReassignableTopicResponse", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]ReassignablePartitionResponse", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ]),
])
