"""mmlog's Python client: Producer, Consumer and Admin over the Kafka protocol.

The names load on first use (PEP 562): `mmlog topics list` needs the admin client
only, and the producer's numba kernels would add half a second to every such command."""

from __future__ import annotations

import importlib

_WHERE = {
    "Admin": "mmlog.client.admin",
    "Consumer": "mmlog.client.consumer", "ConsumerRecord": "mmlog.client.consumer",
    "TopicPartition": "mmlog.client.consumer",
    "BulkMetadata": "mmlog.client.producer", "Producer": "mmlog.client.producer",
    "RecordMetadata": "mmlog.client.producer",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # once loaded, an attribute like any other
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
