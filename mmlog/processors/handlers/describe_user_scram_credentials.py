"""DescribeUserScramCredentials (50): each user's SCRAM mechanisms and iterations, from the credential store.

Served from the processor's copy of the store (security/credentials.py); no salt or
key leaves the broker. A null user list describes every user; a named user without
credentials answers RESOURCE_NOT_FOUND, a name asked twice DUPLICATE_RESOURCE (Kafka's).
"""

from mmlog.errors import ResourceNotFound
from mmlog.protocol.messages import describe_user_scram_credentials as schema
from mmlog.security import scram
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
DUPLICATE_RESOURCE = 92


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.DESCRIBE):
        return schema.RESPONSE(throttle_time_ms=0, error_code=ClusterAuthorizationFailed.code,
                               error_message="not authorized to describe credentials", results=[])
    users = ctx.credentials.current()
    asked = sorted(users) if request.body.users is None else [u.name for u in request.body.users]
    results = []
    for name in asked:
        if asked.count(name) > 1:
            results.append(_result(name, DUPLICATE_RESOURCE, f"user {name!r} asked more than once"))
        elif name not in users:
            results.append(_result(name, ResourceNotFound.code, f"attempt to describe a user credential that "
                                                                f"does not exist: {name}"))
        else:
            infos = [{"mechanism": MECHANISM_CODES[m], "iterations": scram.ScramCredential.from_kafka(text).iterations}
                     for m, text in sorted(users[name].items()) if m in MECHANISM_CODES]
            results.append({"user": name, "error_code": 0, "error_message": None, "credential_infos": infos})
    return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def _result(name: str, code: int, message: str) -> dict:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}
