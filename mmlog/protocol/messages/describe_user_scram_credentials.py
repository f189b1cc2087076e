"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) users have; never secrets.

Kafka: DescribeUserScramCredentialsRequest.json / ...Response.json (valid 0, flexible 0+).
Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from ..schema import Field, Message

API_KEY = 50
VERSIONS = "0"
FLEXIBLE = "0+"

REQUEST = Message("DescribeUserScramCredentialsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("users", "[]UserName", "0+", nullable="0+", fields=[
        Field("name", "string", "0+"),
    ]),
])

RESPONSE = Message("DescribeUserScramCredentialsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("results", "[]DescribeUserScramCredentialsResult", "0+", fields=[
        Field("user", "string", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("credential_infos", "[]CredentialInfo", "0+", fields=[
            Field("mechanism", "int8", "0+"),
            Field("iterations", "int32", "0+"),
        ]),
    ]),
])
