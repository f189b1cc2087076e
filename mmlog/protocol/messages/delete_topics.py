"""DeleteTopics (key 20): delete topics by name.

Kafka: DeleteTopicsRequest.json / DeleteTopicsResponse.json (valid 1-6, flexible 4+).
"""

from ..schema import Field, Message

API_KEY = 20
VERSIONS = "1-4"
FLEXIBLE = "4+"

REQUEST = Message("DeleteTopicsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("topic_names", "[]string", "0-5"),
    Field("timeout_ms", "int32", "0+"),
])

RESPONSE = Message("DeleteTopicsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("responses", "[]DeletableTopicResult", "0+", fields=[
        Field("name", "string", "0+", nullable="6+"),
        Field("error_code", "int16", "0+"),
    ]),
])
