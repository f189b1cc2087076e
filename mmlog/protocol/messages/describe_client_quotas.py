"""DescribeClientQuotas (key 48): the quotas of the entities a filter matches.

Kafka: DescribeClientQuotasRequest.json / DescribeClientQuotasResponse.json (valid 0-1, flexible 1+).
"""

from ..schema import Field, Message

API_KEY = 48
VERSIONS = "0-1"
FLEXIBLE = "1+"

REQUEST = Message("DescribeClientQuotasRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("components", "[]ComponentData", "0+", fields=[
        Field("entity_type", "string", "0+"),
        Field("match_type", "int8", "0+"),
        Field("match", "string", "0+", nullable="0+", default=None),
    ]),
    Field("strict", "bool", "0+"),
])

RESPONSE = Message("DescribeClientQuotasResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("entries", "[]EntryData", "0+", nullable="0+", fields=[
        Field("entity", "[]EntityData", "0+", fields=[
            Field("entity_type", "string", "0+"),
            Field("entity_name", "string", "0+", nullable="0+", default=None),
        ]),
        Field("values", "[]ValueData", "0+", fields=[
            Field("key", "string", "0+"),
            Field("value", "float64", "0+"),
        ]),
    ]),
])
