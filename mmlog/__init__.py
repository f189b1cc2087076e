"""mmlog: a Kafka-style partitioned, persistent log broker built on mmap and shared memory."""

from mmlog.system import kernel_cache as _kernel_cache

__version__ = "0.1.0"

_kernel_cache.configure()  # before any kernel module imports numba: a cache for this state of the sources


def __getattr__(name: str):
    """`mmlog.Producer`, `mmlog.Consumer`, ...: the client loads (numpy, numba) only when first used."""
    if name in ("Producer", "Consumer", "Admin"):
        import mmlog.client

        return getattr(mmlog.client, name)
    raise AttributeError(f"module 'mmlog' has no attribute {name!r}")
