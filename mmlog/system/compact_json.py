"""Compact JSON, as Kafka's ZooKeeper nodes hold it (no spaces, UTF-8): one encoding for every node the
cluster store, the ACL store and the partition states write."""

from __future__ import annotations

import json


def dump(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def load(data: bytes):
    return json.loads(data)
