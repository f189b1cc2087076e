"""DeleteGroups (key 42): delete empty consumer groups and their committed offsets.

Kafka: DeleteGroupsRequest.json / DeleteGroupsResponse.json (valid 0-2, flexible 2+).
"""

from ..schema import Field, Message

API_KEY = 42
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("DeleteGroupsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("groups_names", "[]string", "0+"),
])

RESPONSE = Message("DeleteGroupsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results", "[]DeletableGroupResult", "0+", fields=[
        Field("group_id", "string", "0+"),
        Field("error_code", "int16", "0+"),
    ]),
])
