"""DescribeLogDirs (key 35): a broker's log directories and the size of each partition in them.

Kafka: DescribeLogDirsRequest.json / DescribeLogDirsResponse.json (valid 0-4, flexible 2+).
A null topic list means every partition.
"""

from ..schema import Field, Message

API_KEY = 35
VERSIONS = "1"
FLEXIBLE = "2+"

REQUEST = Message("DescribeLogDirsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
])

RESPONSE = Message("DescribeLogDirsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("results", "[]DescribeLogDirsResult", "0+", fields=[
        Field("error_code", "int16", "0+"),
        Field("log_dir", "string", "0+"),
        Field("topics", "[]DescribeLogDirsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]DescribeLogDirsPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("partition_size", "int64", "0+"),
                Field("offset_lag", "int64", "0+"),
                Field("is_future_key", "bool", "0+"),
            ]),
        ]),
    ]),
])
