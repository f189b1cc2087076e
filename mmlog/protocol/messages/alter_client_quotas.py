"""AlterClientQuotas (key 49): set or remove quotas of user / client-id entities.

Kafka: AlterClientQuotasRequest.json / AlterClientQuotasResponse.json (valid 0-1, flexible 1+).
"""

from ..schema import Field, Message

API_KEY = 49
VERSIONS = "0-1"
FLEXIBLE = "1+"

_ENTITY = [
    Field("entity_type", "string", "0+"),
    Field("entity_name", "string", "0+", nullable="0+", default=None),
]

REQUEST = Message("AlterClientQuotasRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("entries", "[]EntryData", "0+", fields=[
        Field("entity", "[]EntityData", "0+", fields=_ENTITY),
        Field("ops", "[]OpData", "0+", fields=[
            Field("key", "string", "0+"),
            Field("value", "float64", "0+"),
            Field("remove", "bool", "0+"),
        ]),
    ]),
    Field("validate_only", "bool", "0+"),
])

RESPONSE = Message("AlterClientQuotasResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("entries", "[]EntryData", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("entity", "[]EntityData", "0+", fields=_ENTITY),
    ]),
])
