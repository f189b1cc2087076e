"""EndTxn (key 26): commit or abort a producer's transaction.

Kafka: EndTxnRequest.json / EndTxnResponse.json (valid 0-5, flexible 3+).
"""

from ..schema import Field, Message

API_KEY = 26
VERSIONS = "0-2"
FLEXIBLE = "3+"

REQUEST = Message("EndTxnRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("committed", "bool", "0+"),
])

RESPONSE = Message("EndTxnResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
])
