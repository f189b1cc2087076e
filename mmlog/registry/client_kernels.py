"""The kernels of mmlog's client that the registry and the console run in the broker's main process.

Their producers and consumers use mmlog's client there; cold, its numba kernels compile on first use, which
took longer than a client's first registration waits (10 s). The broker compiles them (or loads them from
the on-disk cache, about 0.1 s) before it is ready, when either listener is set.
"""

from __future__ import annotations


def warm_clients() -> None:
    from mmlog.client import bulk, encode, partitioner

    bulk.warm()
    encode.warm()
    partitioner.partition_for_key(b"k", 3)
