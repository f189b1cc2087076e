"""ElectLeaders (key 43): preferred or unclean leader elections, decided by the controller.

Kafka: ElectLeadersRequest.json / ElectLeadersResponse.json (valid 0-2, flexible 2+).
election_type (v1+): 0 preferred, 1 unclean; v0 is preferred only. A null
topic_partitions asks for every partition.
"""

from ..schema import Field, Message

API_KEY = 43
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("ElectLeadersRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("election_type", "int8", "1+", default=0),
    Field("topic_partitions", "[]TopicPartitions", "0+", nullable="0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
    Field("timeout_ms", "int32", "0+", default=60000),
])

RESPONSE = Message("ElectLeadersResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "1+", default=0),
    Field("replica_election_results", "[]ReplicaElectionResult", "0+", fields=[
        Field("topic", "string", "0+"),
        Field("partition_result", "[]PartitionResult", "0+", fields=[
            Field("partition_id", "int32", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ]),
])
