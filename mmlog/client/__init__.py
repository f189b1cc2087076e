"""mmlog's Python client: Producer, Consumer and Admin over the Kafka protocol."""

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer, ConsumerRecord, TopicPartition  # numba loads on first Consumer
from mmlog.client.producer import BulkMetadata, Producer, RecordMetadata

__all__ = ["Admin", "BulkMetadata", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata", "TopicPartition"]
