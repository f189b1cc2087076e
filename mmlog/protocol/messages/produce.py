"""Produce (key 0): append record batches to partitions.

Kafka: ProduceRequest.json / ProduceResponse.json (valid 3-13, flexible 9+).
v3 is the first version carrying magic-v2 batches. ``throttle_time_ms`` comes
*last* in the response. With acks=0 no response is sent at all.
"""

from ..schema import Field, Message

API_KEY = 0
VERSIONS = "3-8"
FLEXIBLE = "9+"

REQUEST = Message("ProduceRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_id", "string", "3+", nullable="3+", default=None),
    Field("acks", "int16", "0+"),
    Field("timeout_ms", "int32", "0+"),
    Field("topic_data", "[]TopicProduceData", "0+", fields=[
        Field("name", "string", "0-12"),
        Field("partition_data", "[]PartitionProduceData", "0+", fields=[
            Field("index", "int32", "0+"),
            Field("records", "records", "0+", nullable="0+"),
        ]),
    ]),
])

RESPONSE = Message("ProduceResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("responses", "[]TopicProduceResponse", "0+", fields=[
        Field("name", "string", "0-12"),
        Field("partition_responses", "[]PartitionProduceResponse", "0+", fields=[
            Field("index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
            Field("base_offset", "int64", "0+"),
            Field("log_append_time_ms", "int64", "2+", default=-1),
            Field("log_start_offset", "int64", "5+", default=-1),
            Field("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                Field("batch_index", "int32", "8+"),
                Field("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ]),
            Field("error_message", "string", "8+", nullable="8+", default=None),
        ]),
    ]),
    Field("throttle_time_ms", "int32", "1+", default=0),
])
