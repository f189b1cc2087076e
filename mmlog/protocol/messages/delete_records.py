"""DeleteRecords (key 21): move partitions' log start offsets forward (served by their leaders).

Kafka: DeleteRecordsRequest.json / DeleteRecordsResponse.json (valid 0-2, flexible 2+).
An offset of -1 means the partition's high watermark.
"""

from ..schema import Field, Message

API_KEY = 21
VERSIONS = "0-1"
FLEXIBLE = "2+"

REQUEST = Message("DeleteRecordsRequest", API_KEY, VERSIONS, FLEXIBLE, [
    Field("topics", "[]DeleteRecordsTopic", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]DeleteRecordsPartition", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("offset", "int64", "0+"),
        ]),
    ]),
    Field("timeout_ms", "int32", "0+"),
])

RESPONSE = Message("DeleteRecordsResponse", API_KEY, VERSIONS, FLEXIBLE, [
    Field("throttle_time_ms", "int32", "0+"),
    Field("topics", "[]DeleteRecordsTopicResult", "0+", fields=[
        Field("name", "string", "0+"),
        Field("partitions", "[]DeleteRecordsPartitionResult", "0+", fields=[
            Field("partition_index", "int32", "0+"),
            Field("low_watermark", "int64", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ]),
])
