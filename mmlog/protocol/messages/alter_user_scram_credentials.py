"""AlterUserScramCredentials (key 51): add or replace (salt, salted password) per user and mechanism, or delete.

The client salts the password; the broker keeps only StoredKey and ServerKey (security/scram.py).
Kafka: AlterUserScramCredentialsRequest.json / ...Response.json (valid 0, flexible 0+).
"""

from ..schema import Field, Message

API_KEY = 51
VERSIONS = "0"
FLEXIBLE = "0+"

REQUEST = Message("AlterUserScramCredentialsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("deletions", "[]ScramCredentialDeletion", "0+", fields=[
        Field("name", "string", "0+"),
        Field("mechanism", "int8", "0+"),
    ]),
    Field("upsertions", "[]ScramCredentialUpsertion", "0+", fields=[
        Field("name", "string", "0+"),
        Field("mechanism", "int8", "0+"),
        Field("iterations", "int32", "0+"),
        Field("salt", "bytes", "0+"),
        Field("salted_password", "bytes", "0+"),
    ]),
])

RESPONSE = Message("AlterUserScramCredentialsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results", "[]AlterUserScramCredentialsResult", "0+", fields=[
        Field("user", "string", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
    ]),
])
