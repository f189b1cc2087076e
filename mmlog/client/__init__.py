from mmlog.client.consumer import Consumer, ConsumerRecord, TopicPartition  # noqa: F401  (numba loads on first Consumer)
from mmlog.client.producer import BulkMetadata, Producer, RecordMetadata  # noqa: F401
from mmlog.client.admin import Admin  # noqa: F401
