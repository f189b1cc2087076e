"""FindCoordinator (key 10): which broker coordinates a group.

Kafka: FindCoordinatorRequest.json / FindCoordinatorResponse.json (valid 0-6, flexible 3+).
"""

from ..schema import Field, Message

API_KEY = 10
VERSIONS = "0-3"
FLEXIBLE = "3+"

REQUEST = Message("FindCoordinatorRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("key", "string", "0-3"),
    Field("key_type", "int8", "1+", default=0),
])

RESPONSE = Message("FindCoordinatorResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0-3"),
    Field("error_message", "string", "1-3", nullable="1-3"),
    Field("node_id", "int32", "0-3"),
    Field("host", "string", "0-3"),
    Field("port", "int32", "0-3"),
])
