"""TxnOffsetCommit (key 28): offsets committed as part of a transaction, visible on its commit.

Kafka: TxnOffsetCommitRequest.json / TxnOffsetCommitResponse.json (valid 0-5, flexible 3+).
"""

from ..schema import Field, Message

API_KEY = 28
VERSIONS = "0-3"
FLEXIBLE = "3+"

REQUEST = Message("TxnOffsetCommitRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_id", "string", "0+"),
    Field("group_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("generation_id", "int32", "3+", default=-1),
    Field("member_id", "string", "3+", default=""),
    Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    Field("topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("committed_offset", "int64", "0+"),
            Field("committed_leader_epoch", "int32", "2+", default=-1),
            Field("committed_metadata", "string", "0+", nullable="0+"),
        ]),
    ]),
])

RESPONSE = Message("TxnOffsetCommitResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ]),
])
