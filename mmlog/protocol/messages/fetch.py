"""Fetch (key 1): read record batches from partitions.

Kafka: FetchRequest.json / FetchResponse.json (valid 4-18, flexible 12+).
Through v11 ``records`` is the last field of each partition, so a response is
[prefix][records of partition 1][prefix][records of partition 2]...: the broker
encodes it with `Message.encode_parts` and a `Placeholder` per records field.
"""

from ..schema import Field, Message

API_KEY = 1
VERSIONS = "4-11"
FLEXIBLE = "12+"

REQUEST = Message("FetchRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("replica_id", "int32", "0-14", default=-1),
    Field("max_wait_ms", "int32", "0+"),
    Field("min_bytes", "int32", "0+"),
    Field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    Field("isolation_level", "int8", "4+", default=0),
    Field("session_id", "int32", "7+", default=0),
    Field("session_epoch", "int32", "7+", default=-1),
    Field("topics", "[]FetchTopic", "0+", fields=[
        Field("topic", "string", "0-12"),
        Field("partitions", "[]FetchPartition", "0+", fields=[
            Field("partition", "int32", "0+"),
            Field("current_leader_epoch", "int32", "9+", default=-1),
            Field("fetch_offset", "int64", "0+"),
            Field("log_start_offset", "int64", "5+", default=-1),
            Field("partition_max_bytes", "int32", "0+"),
        ]),
    ]),
    Field("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=[
        Field("topic", "string", "7-12"),
        Field("partitions", "[]int32", "7+"),
    ]),
    Field("rack_id", "string", "11+", default=""),
])

RESPONSE = Message("FetchResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "7+"),
    Field("session_id", "int32", "7+", default=0),
    Field("responses", "[]FetchableTopicResponse", "0+", fields=[
        Field("topic", "string", "0-12"),
        Field("partitions", "[]PartitionData", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
            Field("high_watermark", "int64", "0+"),
            Field("last_stable_offset", "int64", "4+", default=-1),
            Field("log_start_offset", "int64", "5+", default=-1),
            Field("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=[
                Field("producer_id", "int64", "4+"),
                Field("first_offset", "int64", "4+"),
            ]),
            Field("preferred_read_replica", "int32", "11+", default=-1),
            Field("records", "records", "0+", nullable="0+"),
        ]),
    ]),
])
