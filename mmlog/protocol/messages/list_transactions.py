"""ListTransactions (key 66): the transactional ids a broker coordinates (kafka-transactions.sh list).

Kafka: ListTransactionsRequest.json / ListTransactionsResponse.json (valid 0-2, flexible 0+).
"""

from ..schema import Field, Message

API_KEY = 66
VERSIONS = "0-1"
FLEXIBLE = "0+"

REQUEST = Message("ListTransactionsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("state_filters", "[]string", "0+"),
    Field("producer_id_filters", "[]int64", "0+"),
    Field("duration_filter", "int64", "1+", default=-1),
])

RESPONSE = Message("ListTransactionsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("unknown_state_filters", "[]string", "0+"),
    Field("transaction_states", "[]TransactionState", "0+", fields=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("transaction_state", "string", "0+"),
    ]),
])
