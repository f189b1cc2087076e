"""SyncGroup (key 14): the leader hands out assignments; members receive theirs.

Kafka: SyncGroupRequest.json / SyncGroupResponse.json (valid 0-5, flexible 4+).
"""

from ..schema import Field, Message

API_KEY = 14
VERSIONS = "0-5"
FLEXIBLE = "4+"

REQUEST = Message("SyncGroupRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("generation_id", "int32", "0+"),
    Field("member_id", "string", "0+"),
    Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    Field("protocol_type", "string", "5+", nullable="5+", default=None),
    Field("protocol_name", "string", "5+", nullable="5+", default=None),
    Field("assignments", "[]SyncGroupRequestAssignment", "0+", fields=[
        Field("member_id", "string", "0+"),
        Field("assignment", "bytes", "0+"),
    ]),
])

RESPONSE = Message("SyncGroupResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field("protocol_type", "string", "5+", nullable="5+", default=None),
    Field("protocol_name", "string", "5+", nullable="5+", default=None),
    Field("assignment", "bytes", "0+"),
])
