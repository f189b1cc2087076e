"""CreateAcls (key 30): add ACL bindings, each answered on its own.

Kafka: CreateAclsRequest.json / CreateAclsResponse.json (valid 0-3, flexible 2+).
v0 has no pattern type: its bindings are LITERAL (3).
"""

from ..schema import Field, Message

API_KEY = 30
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("CreateAclsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("creations", "[]AclCreation", "0+", fields=[
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
        Field("resource_pattern_type", "int8", "1+", default=3),
        Field("principal", "string", "0+"),
        Field("host", "string", "0+"),
        Field("operation", "int8", "0+"),
        Field("permission_type", "int8", "0+"),
    ]),
])

RESPONSE = Message("CreateAclsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results", "[]AclCreationResult", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
    ]),
])
