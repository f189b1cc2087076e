"""DeleteAcls (key 31): remove the ACL bindings matching each filter, answering which went.

Kafka: DeleteAclsRequest.json / DeleteAclsResponse.json (valid 0-3, flexible 2+).
v0 has no pattern type: its filters and answers are LITERAL (3).
"""

from ..schema import Field, Message
from .describe_acls import FILTER

API_KEY = 31
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("DeleteAclsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("filters", "[]DeleteAclsFilter", "0+", fields=FILTER),
])

RESPONSE = Message("DeleteAclsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("filter_results", "[]DeleteAclsFilterResult", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("matching_acls", "[]DeleteAclsMatchingAcl", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("pattern_type", "int8", "1+", default=3),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ]),
])
