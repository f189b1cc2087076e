"""SaslHandshake (key 17): the client names its SASL mechanism; the broker lists the enabled ones.

v0 is followed by raw SASL tokens (size-prefixed, no Kafka header); v1 by SaslAuthenticate requests.
Kafka: SaslHandshakeRequest.json / SaslHandshakeResponse.json (valid 0-1, never flexible).
"""

from ..schema import Field, Message

API_KEY = 17
VERSIONS = "0-1"
FLEXIBLE = "none"

REQUEST = Message("SaslHandshakeRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("mechanism", "string", "0+"),
])

RESPONSE = Message("SaslHandshakeResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("error_code", "int16", "0+"),
    Field("mechanisms", "[]string", "0+"),
])
