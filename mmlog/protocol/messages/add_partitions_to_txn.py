"""AddPartitionsToTxn (key 24): partitions join a producer's transaction before it writes to them.

Kafka: AddPartitionsToTxnRequest.json / AddPartitionsToTxnResponse.json (valid 0-5,
flexible 3+; v4+ batch several transactions for brokers' verification, KIP-890).
Clients send v0-3, whose fields Kafka's schema calls V3AndBelow*.
"""

from ..schema import Field, Message

API_KEY = 24
VERSIONS = "0-2"
FLEXIBLE = "3+"

REQUEST = Message("AddPartitionsToTxnRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("v3_and_below_transactional_id", "string", "0-3"),
    Field("v3_and_below_producer_id", "int64", "0-3"),
    Field("v3_and_below_producer_epoch", "int16", "0-3"),
    Field("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
])

RESPONSE = Message("AddPartitionsToTxnResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3", fields=[
        Field("name", "string", "0+"),
        Field("results_by_partition", "[]AddPartitionsToTxnPartitionResult", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("partition_error_code", "int16", "0+"),
        ]),
    ]),
])
