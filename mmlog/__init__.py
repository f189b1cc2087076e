"""mmlog: a Kafka-style partitioned, persistent log broker built on mmap and shared memory."""

__version__ = "0.1.0"
