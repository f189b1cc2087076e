"""ListPartitionReassignments (key 46): the reassignments in progress (KIP-455).

Kafka: ListPartitionReassignmentsRequest.json / ...Response.json (valid 0, flexible 0+).
Null topics lists every one.
"""

from ..schema import Field, Message

API_KEY = 46
VERSIONS = "0"
FLEXIBLE = "0+"

REQUEST = Message("ListPartitionReassignmentsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("timeout_ms", "int32", "0+", default=60000),
    Field("topics", "[]ListPartitionReassignmentsTopics", "0+", nullable="0+", default=None, fields=[
        Field("name", "string", "0+"),
        Field("partition_indexes", "[]int32", "0+"),
    ]),
])

RESPONSE = Message("ListPartitionReassignmentsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("topics", "[]OngoingTopicReassignment", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]OngoingPartitionReassignment", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("replicas", "[]int32", "0+"),
            Field("adding_replicas", "[]int32", "0+"),
            Field("removing_replicas", "[]int32", "0+"),
        ]),
    ]),
])
