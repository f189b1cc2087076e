"""mmlog: a Kafka-style partitioned, persistent log broker built on mmap and shared memory."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """`mmlog.Producer`, `mmlog.Consumer`, ...: the client loads (numpy, numba) only when first used."""
    if name in ("Producer", "Consumer", "Admin"):
        import mmlog.client

        return getattr(mmlog.client, name)
    raise AttributeError(f"module 'mmlog' has no attribute {name!r}")
