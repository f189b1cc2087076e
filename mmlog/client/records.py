"""What a consumer hands to the application: `TopicPartition` and `ConsumerRecord`.

Both are NamedTuples: cheap to build in bulk (the consumer makes records with
`tuple.__new__` over zipped columns, about 0.1 µs each), immutable, hashable,
and unpackable. This module imports nothing heavy, so `import mmlog.client`
stays quick; the numpy side of consuming is `mmlog.client.bulk`.
"""

from __future__ import annotations

from typing import NamedTuple

# timestamp_type values, as Kafka numbers them (attribute bit 3 of the batch)
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class TopicPartition(NamedTuple):
    """One partition of a topic. Plain `(topic, partition)` tuples are accepted wherever this is."""

    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    """One record as the consumer delivers it.

    `key` and `value` are bytes or None (null). `headers` is a tuple of
    `(key: str, value: bytes | None)` pairs, empty when the record has none.
    `timestamp` is milliseconds since the epoch: the producer's CreateTime, or
    the broker's LogAppendTime when `timestamp_type` is 1.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = CREATE_TIME

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def as_topic_partition(tp) -> TopicPartition:
    """A TopicPartition from a TopicPartition or any (topic, partition) pair; TypeError otherwise."""
    if isinstance(tp, TopicPartition):
        return tp
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise TypeError(f"expected a (topic, partition) pair, got {tp!r}") from None
    if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
        raise TypeError(f"expected a (str topic, int partition) pair, got {tp!r}")
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    return TopicPartition(topic, partition)
