"""WriteTxnMarkers (key 27): a transaction coordinator tells partition leaders to end a transaction.

Kafka: WriteTxnMarkersRequest.json / WriteTxnMarkersResponse.json (valid 0-1, flexible 1+).
Broker to broker only: each marker makes the leader append a control batch (commit
or abort) for the producer to each named partition. Clients never send it.
"""

from ..schema import Field, Message

API_KEY = 27
VERSIONS = "0"
FLEXIBLE = "1+"

REQUEST = Message("WriteTxnMarkersRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("markers", "[]WritableTxnMarker", "0+", fields=[
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("transaction_result", "bool", "0+"),  # True: commit
        Field("topics", "[]WritableTxnMarkerTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
        Field("coordinator_epoch", "int32", "0+"),
    ]),
])

RESPONSE = Message("WriteTxnMarkersResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("markers", "[]WritableTxnMarkerResult", "0+", fields=[
        Field("producer_id", "int64", "0+"),
        Field("topics", "[]WritableTxnMarkerTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ]),
])
