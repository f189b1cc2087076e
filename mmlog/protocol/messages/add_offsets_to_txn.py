"""AddOffsetsToTxn (key 25): a consumer group's offsets join a transaction (send_offsets_to_transaction).

Kafka: AddOffsetsToTxnRequest.json / AddOffsetsToTxnResponse.json (valid 0-4, flexible 3+).
"""

from ..schema import Field, Message

API_KEY = 25
VERSIONS = "0-2"
FLEXIBLE = "3+"

REQUEST = Message("AddOffsetsToTxnRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("group_id", "string", "0+"),
])

RESPONSE = Message("AddOffsetsToTxnResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
])
