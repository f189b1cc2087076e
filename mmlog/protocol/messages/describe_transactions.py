"""DescribeTransactions (key 65): the state of transactional ids (kafka-transactions.sh describe).

Kafka: DescribeTransactionsRequest.json / DescribeTransactionsResponse.json (valid 0, flexible 0+).
"""

from ..schema import Field, Message

API_KEY = 65
VERSIONS = "0"
FLEXIBLE = "0+"

REQUEST = Message("DescribeTransactionsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_ids", "[]string", "0+"),
])

RESPONSE = Message("DescribeTransactionsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("transaction_states", "[]TransactionState", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("transactional_id", "string", "0+"),
        Field("transaction_state", "string", "0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("transaction_start_time_ms", "int64", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ]),
])
