"""AlterConfigs (key 33): replace the whole set of dynamic configs of topics and brokers.

Kafka: AlterConfigsRequest.json / AlterConfigsResponse.json (valid 0-2, flexible 2+).
"""

from ..schema import Field, Message

API_KEY = 33
VERSIONS = "0-1"
FLEXIBLE = "2+"

REQUEST = Message("AlterConfigsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("resources", "[]AlterConfigsResource", "0+", fields=[
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
        Field("configs", "[]AlterableConfig", "0+", fields=[
            Field("name", "string", "0+"),
            Field("value", "string", "0+", nullable="0+"),
        ]),
    ]),
    Field("validate_only", "bool", "0+"),
])

RESPONSE = Message("AlterConfigsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("responses", "[]AlterConfigsResourceResponse", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
    ]),
])
