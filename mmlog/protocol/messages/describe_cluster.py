"""DescribeCluster (key 60): cluster id, controller and brokers (admin tools; flexible only).

Kafka: DescribeClusterRequest.json / DescribeClusterResponse.json (valid 0-1, flexible 0+).
"""

from ..schema import Field, Message

API_KEY = 60
VERSIONS = "0-1"
FLEXIBLE = "0+"

REQUEST = Message("DescribeClusterRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("include_cluster_authorized_operations", "bool", "0+"),
    Field("endpoint_type", "int8", "1+", default=1),
])

RESPONSE = Message("DescribeClusterResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "0+", nullable="0+", default=None),
    Field("endpoint_type", "int8", "1+", default=1),
    Field("cluster_id", "string", "0+"),
    Field("controller_id", "int32", "0+", default=-1),
    Field("brokers", "[]DescribeClusterBroker", "0+", fields=[
        Field("broker_id", "int32", "0+"),
        Field("host", "string", "0+"),
        Field("port", "int32", "0+"),
        Field("rack", "string", "0+", nullable="0+", default=None),
    ]),
    Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
])
