"""InitProducerId (key 22): hand out a producer id and epoch (idempotence).

Kafka: InitProducerIdRequest.json / InitProducerIdResponse.json (valid 0-6, flexible 2+).
kafka-python 3.x producers need it by default (idempotence on).
"""

from ..schema import Field, Message

API_KEY = 22
VERSIONS = "0-3"
FLEXIBLE = "2+"

REQUEST = Message("InitProducerIdRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("transactional_id", "string", "0+", nullable="0+"),
    Field("transaction_timeout_ms", "int32", "0+"),
    Field("producer_id", "int64", "3+", default=-1),
    Field("producer_epoch", "int16", "3+", default=-1),
])

RESPONSE = Message("InitProducerIdResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("producer_id", "int64", "0+", default=-1),
    Field("producer_epoch", "int16", "0+"),
])
