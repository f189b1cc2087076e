"""LeaveGroup (key 13): members leave a group.

Kafka: LeaveGroupRequest.json / LeaveGroupResponse.json (valid 0-5, flexible 4+).
v3 replaces the single ``member_id`` with a batch of ``members`` (KIP-345).
"""

from ..schema import Field, Message

API_KEY = 13
VERSIONS = "0-5"
FLEXIBLE = "4+"

REQUEST = Message("LeaveGroupRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("group_id", "string", "0+"),
    Field("member_id", "string", "0-2"),
    Field("members", "[]MemberIdentity", "3+", fields=[
        Field("member_id", "string", "3+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("reason", "string", "5+", nullable="5+", default=None),
    ]),
])

RESPONSE = Message("LeaveGroupResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field("members", "[]MemberResponse", "3+", fields=[
        Field("member_id", "string", "3+"),
        Field("group_instance_id", "string", "3+", nullable="3+"),
        Field("error_code", "int16", "3+"),
    ]),
])
