"""DescribeAcls (29): the ACL bindings matching a filter, grouped by resource pattern, from the processor's copy.

Kafka's answers: SECURITY_DISABLED without an authoriser, CLUSTER_AUTHORIZATION_FAILED
without DESCRIBE on the cluster, INVALID_REQUEST for a filter with an unknown code.
Served from the ACL file this processor reads (security/acls.py), re-checked first.
"""

from mmlog.errors import ClusterAuthorizationFailed, InvalidRequest, SecurityDisabled
from mmlog.protocol.messages import describe_acls as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    body = request.body
    authorizer = ctx.authorizer
    if not authorizer.enabled:
        return _error(SecurityDisabled.code, "no authorizer is configured on the broker")
    if not authorizer.cluster(request.conn, acls.DESCRIBE):
        return _error(ClusterAuthorizationFailed.code, "not authorized to describe ACLs")
    try:
        flt = acls.Filter(body.resource_type_filter, body.resource_name_filter, body.pattern_type_filter,
                          body.principal_filter, body.host_filter, body.operation, body.permission_type).check()
    except acls.InvalidAcl as exc:
        return _error(InvalidRequest.code, str(exc))
    authorizer.refresh()
    resources: dict[tuple, list] = {}
    for b in sorted(authorizer.acls.bindings):
        if flt.matches(b) and (request.version >= 1 or b.pattern_type == acls.LITERAL):
            resources.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
                {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission})
    return schema.RESPONSE(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": entries}
        for (t, n, p), entries in resources.items()])


def _error(code: int, message: str):
    return schema.RESPONSE(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
