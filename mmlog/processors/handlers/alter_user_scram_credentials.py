"""AlterUserScramCredentials (51): upsert or delete SCRAM credentials (the control plane writes the store).

Checked here as Kafka checks them, per user: an unknown mechanism code
UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an empty user name
UNACCEPTABLE_CREDENTIAL, a user named twice in one request DUPLICATE_RESOURCE, deleting
a credential that does not exist RESOURCE_NOT_FOUND. The rest go to the control plane
(ZooKeeper's /config/users/<name> in cluster mode, the data dir's credentials.json
standalone), which stores StoredKey and ServerKey derived from the salted password,
never the salted password itself.
"""

from collections import Counter

from mmlog.errors import UnacceptableCredential, UnsupportedSaslMechanism
from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import alter_user_scram_credentials as schema
from mmlog.security import scram
from mmlog.security import acls
from mmlog.errors import ClusterAuthorizationFailed
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import ALTER_SCRAM_CREDENTIALS

API_KEY = schema.API_KEY
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
DUPLICATE_RESOURCE = 92


def handle(ctx: HandlerContext, request):
    if not ctx.authorizer.cluster(request.conn, acls.ALTER):
        names = dict.fromkeys(u.name for u in [*request.body.deletions, *request.body.upsertions])
        return schema.RESPONSE(throttle_time_ms=0, results=[
            {"user": n, "error_code": ClusterAuthorizationFailed.code, "error_message": "not authorized"}
            for n in names])
    body = request.body
    counts = Counter(d.name for d in body.deletions) + Counter(u.name for u in body.upsertions)
    refused: dict[str, tuple[int, str]] = {}
    for item in [*body.deletions, *body.upsertions]:
        name = item.name
        if counts[name] > 1:
            refused[name] = (DUPLICATE_RESOURCE, f"user {name!r} appears more than once in the request")
        elif item.mechanism not in MECHANISMS:
            refused[name] = (UnsupportedSaslMechanism.code, f"unknown SCRAM mechanism {item.mechanism}")
        elif not name:
            refused[name] = (UnacceptableCredential.code, "user name is empty")
        elif hasattr(item, "iterations") and not scram.MIN_ITERATIONS <= item.iterations <= scram.MAX_ITERATIONS:
            refused[name] = (UnacceptableCredential.code, f"iterations {item.iterations} outside "
                                                          f"{scram.MIN_ITERATIONS}..{scram.MAX_ITERATIONS}")
    deletions = [(d.name, MECHANISMS[d.mechanism]) for d in body.deletions if d.name not in refused]
    upsertions = [(u.name, MECHANISMS[u.mechanism],
                   scram.from_salted(MECHANISMS[u.mechanism], bytes(u.salted_password), bytes(u.salt),
                                     u.iterations).to_kafka())
                  for u in body.upsertions if u.name not in refused]

    def respond(results):
        ctx.credentials.current()
        return schema.RESPONSE(throttle_time_ms=0, results=[
            {"user": name, "error_code": code, "error_message": msg} for name, (code, msg) in
            sorted({**results, **refused}.items())])

    return forward(ctx, request, ALTER_SCRAM_CREDENTIALS, {"deletions": deletions, "upsertions": upsertions},
                   lambda results: respond({name: tuple(r) for name, r in results.items()}),
                   lambda code: {name: (code, failure_message(code))
                            for name, *_ in deletions + upsertions})
