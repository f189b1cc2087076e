"""DescribeAcls (key 29): the ACL bindings that match one filter.

Kafka: DescribeAclsRequest.json / DescribeAclsResponse.json (valid 0-3, flexible 2+).
v0 has no pattern type: its filter and its answers are LITERAL (3). Codes as in
mmlog/security/acls.py (resource type, pattern type, operation, permission).
"""

from ..schema import Field, Message

API_KEY = 29
VERSIONS = "0-2"
FLEXIBLE = "2+"

# An ACL filter: DescribeAcls' request, and each of DeleteAcls' filters (Kafka's two JSON files agree).
FILTER = [
    Field("resource_type_filter", "int8", "0+"),
    Field("resource_name_filter", "string", "0+", nullable="0+"),
    Field("pattern_type_filter", "int8", "1+", default=3),
    Field("principal_filter", "string", "0+", nullable="0+"),
    Field("host_filter", "string", "0+", nullable="0+"),
    Field("operation", "int8", "0+"),
    Field("permission_type", "int8", "0+"),
]

REQUEST = Message("DescribeAclsRequest", API_KEY, VERSIONS, FLEXIBLE, FILTER)

RESPONSE = Message("DescribeAclsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("resources", "[]DescribeAclsResource", "0+", fields=[
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
        Field("pattern_type", "int8", "1+", default=3),
        Field("acls", "[]AclDescription", "0+", fields=[
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ]),
])
