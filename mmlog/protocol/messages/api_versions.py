"""ApiVersions (key 18): which API versions the broker speaks.

Kafka: ApiVersionsRequest.json / ApiVersionsResponse.json (valid 0-4, flexible 3+).
The response header is always v0, even in flexible versions (see header.py).
"""

from ..schema import Field, Message

API_KEY = 18
VERSIONS = "0-3"
FLEXIBLE = "3+"

REQUEST = Message("ApiVersionsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("client_software_name", "string", "3+"),
    Field("client_software_version", "string", "3+"),
])

RESPONSE = Message("ApiVersionsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("error_code", "int16", "0+"),
    Field("api_keys", "[]ApiVersion", "0+", fields=[
        Field("api_key", "int16", "0+"),
        Field("min_version", "int16", "0+"),
        Field("max_version", "int16", "0+"),
    ]),
    Field("throttle_time_ms", "int32", "1+"),
    Field("supported_features", "[]SupportedFeatureKey", "3+", tag=0, tagged="3+", fields=[
        Field("name", "string", "3+"),
        Field("min_version", "int16", "3+"),
        Field("max_version", "int16", "3+"),
    ]),
    Field("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
    Field("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, tagged="3+", fields=[
        Field("name", "string", "3+"),
        Field("max_version_level", "int16", "3+"),
        Field("min_version_level", "int16", "3+"),
    ]),
    Field("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", default=False),
])
