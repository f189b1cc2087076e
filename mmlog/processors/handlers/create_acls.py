"""CreateAcls (30): add ACL bindings; the control plane writes the store (ZooKeeper or the data dir's file).

Each creation is answered on its own, as Kafka answers: SECURITY_DISABLED without an
authoriser, CLUSTER_AUTHORIZATION_FAILED for all without ALTER on the cluster,
INVALID_REQUEST for a binding Kafka refuses (unknown or ANY/MATCH codes, a Cluster
resource not named kafka-cluster, a principal not of the form Type:name,
DelegationToken). Creating a binding that exists already succeeds.
"""

from mmlog.errors import ClusterAuthorizationFailed, InvalidRequest, SecurityDisabled
from mmlog.processors.handlers._common import failure_message, forward
from mmlog.protocol.messages import create_acls as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import CREATE_ACLS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    creations = request.body.creations
    authorizer = ctx.authorizer
    if not authorizer.enabled:
        return _answer([(SecurityDisabled.code, "no authorizer is configured on the broker")] * len(creations))
    if not authorizer.cluster(request.conn, acls.ALTER):
        return _answer([(ClusterAuthorizationFailed.code, "not authorized to create ACLs")] * len(creations))
    results: list = []
    valid = []
    for c in creations:
        try:
            valid.append(acls.Binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                      c.operation, c.permission_type).check())
            results.append(None)
        except acls.InvalidAcl as exc:
            results.append((InvalidRequest.code, str(exc)))

    def respond(codes):
        authorizer.refresh()  # this processor sees its own change at once
        codes = iter(codes)
        return _answer([r if r is not None else tuple(next(codes)) for r in results])

    return forward(ctx, request, CREATE_ACLS, [tuple(b) for b in valid], respond,
                   lambda code: [(code, failure_message(code))] * len(valid))


def _answer(results):
    return schema.RESPONSE(throttle_time_ms=0, results=[{"error_code": c, "error_message": m} for c, m in results])
