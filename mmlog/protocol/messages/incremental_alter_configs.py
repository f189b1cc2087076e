"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from configs of topics and brokers.

Kafka: IncrementalAlterConfigsRequest.json / IncrementalAlterConfigsResponse.json (valid 0-1, flexible 1+).
config_operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
"""

from ..schema import Field, Message

API_KEY = 44
VERSIONS = "0-1"
FLEXIBLE = "1+"

REQUEST = Message("IncrementalAlterConfigsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("resources", "[]AlterConfigsResource", "0+", fields=[
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
        Field("configs", "[]AlterableConfig", "0+", fields=[
            Field("name", "string", "0+"),
            Field("config_operation", "int8", "0+"),
            Field("value", "string", "0+", nullable="0+"),
        ]),
    ]),
    Field("validate_only", "bool", "0+"),
])

RESPONSE = Message("IncrementalAlterConfigsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("responses", "[]AlterConfigsResourceResponse", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("resource_type", "int8", "0+"),
        Field("resource_name", "string", "0+"),
    ]),
])
