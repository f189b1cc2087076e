"""SaslAuthenticate (key 36): one SASL token each way; v1+ tells the session's lifetime (re-authentication).

Kafka: SaslAuthenticateRequest.json / SaslAuthenticateResponse.json (valid 0-2, flexible 2+).
"""

from ..schema import Field, Message

API_KEY = 36
VERSIONS = "0-2"
FLEXIBLE = "2+"

REQUEST = Message("SaslAuthenticateRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("auth_bytes", "bytes", "0+"),
])

RESPONSE = Message("SaslAuthenticateResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("auth_bytes", "bytes", "0+"),
    Field("session_lifetime_ms", "int64", "1+", default=0),
])
