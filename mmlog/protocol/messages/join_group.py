"""JoinGroup (key 11): join a consumer group and take part in a rebalance.

Kafka: JoinGroupRequest.json / JoinGroupResponse.json (valid 0-9, flexible 6+).
v5 adds ``group_instance_id`` (static membership, KIP-345).
"""

from ..schema import Field, Message

API_KEY = 11
VERSIONS = "0-7"
FLEXIBLE = "6+"

REQUEST = Message("JoinGroupRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("session_timeout_ms", "int32", "0+"),
    Field("rebalance_timeout_ms", "int32", "1+", default=-1),
    Field("member_id", "string", "0+"),
    Field("group_instance_id", "string", "5+", nullable="5+", default=None),
    Field("protocol_type", "string", "0+"),
    Field("protocols", "[]JoinGroupRequestProtocol", "0+", fields=[
        Field("name", "string", "0+"),
        Field("metadata", "bytes", "0+"),
    ]),
])

RESPONSE = Message("JoinGroupResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "2+"),
    Field("error_code", "int16", "0+"),
    Field("generation_id", "int32", "0+", default=-1),
    Field("protocol_type", "string", "7+", nullable="7+", default=None),
    Field("protocol_name", "string", "0+", nullable="7+"),
    Field("leader", "string", "0+"),
    Field("member_id", "string", "0+"),
    Field("members", "[]JoinGroupResponseMember", "0+", fields=[
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "5+", nullable="5+", default=None),
        Field("metadata", "bytes", "0+"),
    ]),
])
