"""ListGroups (key 16): the groups a coordinator knows.

Kafka: ListGroupsRequest.json / ListGroupsResponse.json (valid 0-5, flexible 3+).
The request body is empty through v3.
"""

from ..schema import Field, Message

API_KEY = 16
VERSIONS = "0-4"
FLEXIBLE = "3+"

REQUEST = Message("ListGroupsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("states_filter", "[]string", "4+"),
])

RESPONSE = Message("ListGroupsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0+"),
    Field("groups", "[]ListedGroup", "0+", fields=[
        Field("group_id", "string", "0+"),
        Field("protocol_type", "string", "0+"),
        Field("group_state", "string", "4+"),
    ]),
])
