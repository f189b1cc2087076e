"""Metadata (key 3): brokers, topics, partition leaders and replicas.

Kafka: MetadataRequest.json / MetadataResponse.json (valid 0-13, flexible 9+).
A null ``topics`` (v1+) asks for all topics; an empty one for brokers only; v0
cannot send null and means all topics by an empty array.
"""

from ..schema import Field, Message

API_KEY = 3
VERSIONS = "0-12"
FLEXIBLE = "9+"

REQUEST = Message("MetadataRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=[
        Field("topic_id", "uuid", "10+"),
        Field("name", "string", "0+", nullable="10+"),
    ]),
    Field("allow_auto_topic_creation", "bool", "4+", default=True),
    Field("include_cluster_authorized_operations", "bool", "8-10"),
    Field("include_topic_authorized_operations", "bool", "8+"),
])

RESPONSE = Message("MetadataResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "3+"),
    Field("brokers", "[]MetadataResponseBroker", "0+", fields=[
        Field("node_id", "int32", "0+"),
        Field("host", "string", "0+"),
        Field("port", "int32", "0+"),
        Field("rack", "string", "1+", nullable="1+", default=None),
    ]),
    Field("cluster_id", "string", "2+", nullable="2+", default=None),
    Field("controller_id", "int32", "1+", default=-1),
    Field("topics", "[]MetadataResponseTopic", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("name", "string", "0+", nullable="12+"),
        Field("topic_id", "uuid", "10+"),
        Field("is_internal", "bool", "1+", default=False),
        Field("partitions", "[]MetadataResponsePartition", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("partition_index", "int32", "0+"),
            Field("leader_id", "int32", "0+"),
            Field("leader_epoch", "int32", "7+", default=-1),
            Field("replica_nodes", "[]int32", "0+"),
            Field("isr_nodes", "[]int32", "0+"),
            Field("offline_replicas", "[]int32", "5+"),
        ]),
        Field("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ]),
    Field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
])
