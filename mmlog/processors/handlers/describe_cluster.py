"""DescribeCluster (60): the cluster id, the controller and the live brokers, from the cluster view
(the same brokers, hosts and ports as Metadata; AdminClient.describe_cluster, kafka-cluster.sh)."""

from mmlog.protocol.messages import describe_cluster as schema
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
BROKERS = 1  # endpoint_type: brokers (2, controllers, is KRaft's: refused as Kafka's brokers refuse it)
UNSUPPORTED_ENDPOINT_TYPE = 119


def handle(ctx: HandlerContext, request):
    body = request.body
    if request.header.api_version >= 1 and body.endpoint_type != BROKERS:
        return schema.RESPONSE(throttle_time_ms=0, error_code=UNSUPPORTED_ENDPOINT_TYPE,
                               error_message=f"endpoint type {body.endpoint_type} is not served by brokers",
                               endpoint_type=body.endpoint_type, cluster_id="", controller_id=-1, brokers=[])
    view = ctx.views.current()
    return schema.RESPONSE(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS, cluster_id=ctx.cluster_id,
        controller_id=view.controller_id,
        brokers=[{"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                 for b in sorted(view.brokers.values(), key=lambda b: b.node_id)
                 for host, port in (b.address(request.conn.listener_name),)])
