"""DeleteAcls (31): remove the bindings matching each filter; the control plane edits the store.

Each filter answers with the bindings it removed. SECURITY_DISABLED without an
authoriser, CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, INVALID_REQUEST
for a filter with an unknown code (Kafka's answers), each per filter.
"""

from mmlog.errors import ClusterAuthorizationFailed, InvalidRequest, SecurityDisabled
from mmlog.processors.handlers._common import COORDINATOR_NOT_AVAILABLE, forward
from mmlog.protocol.messages import delete_acls as schema
from mmlog.security import acls
from mmlog.processors.handler_context import HandlerContext
from mmlog.ipc.control_ops import DELETE_ACLS

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    filters = request.body.filters
    authorizer = ctx.authorizer
    if not authorizer.enabled:
        return _answer([(SecurityDisabled.code, "no authorizer is configured on the broker", [])] * len(filters))
    if not authorizer.cluster(request.conn, acls.ALTER):
        return _answer([(ClusterAuthorizationFailed.code, "not authorized to delete ACLs", [])] * len(filters))
    results: list = []
    valid = []
    for f in filters:
        try:
            valid.append(acls.Filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                     f.principal_filter, f.host_filter, f.operation, f.permission_type).check())
            results.append(None)
        except acls.InvalidAcl as exc:
            results.append((InvalidRequest.code, str(exc), []))

    def respond(deleted):
        authorizer.refresh()
        if deleted is None:  # the control plane could not answer
            return _answer([r or (COORDINATOR_NOT_AVAILABLE, "control plane unavailable", []) for r in results])
        deleted = iter(deleted)
        return _answer([r or (0, None, [acls.Binding(*b) for b in next(deleted)]) for r in results])

    return forward(ctx, request, DELETE_ACLS, [tuple(f) for f in valid], respond, lambda code: None)


def _answer(results):
    return schema.RESPONSE(throttle_time_ms=0, filter_results=[
        {"error_code": code, "error_message": message, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": b.resource_type, "resource_name": b.name,
             "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission} for b in matching]}
        for code, message, matching in results])
