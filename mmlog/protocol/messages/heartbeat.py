"""Heartbeat (key 12): a member tells the coordinator it is alive.

Kafka: HeartbeatRequest.json / HeartbeatResponse.json (valid 0-4, flexible 4+).
"""

from ..schema import Field, Message

API_KEY = 12
VERSIONS = "0-4"
FLEXIBLE = "4+"

REQUEST = Message("HeartbeatRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("generation_id", "int32", "0+"),
    Field("member_id", "string", "0+"),
    Field("group_instance_id", "string", "3+", nullable="3+", default=None),
])

RESPONSE = Message("HeartbeatResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
])
