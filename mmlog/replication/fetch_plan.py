"""The fetch plan: which partitions this broker follows, from which leader, in which epoch.

Written by the main process (`acceptor/zookeeper/replicas.py`) as `fetch-plan.json`
in the first data dir, atomically; the fetcher re-reads it when it was replaced
(a `stat` per poll).

    {"brokers": {"2": ["127.0.0.1", 9093], ...},
     "partitions": [["topic", 0, 2, 7], ...]}      # topic, partition, leader id, leader epoch
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mmlog.log.files import atomic_write, file_stamp

FILE_NAME = "fetch-plan.json"


@dataclass
class Source:
    """A leader broker and the partitions (topic, partition) -> leader epoch we follow on it."""

    leader_id: int
    address: tuple[str, int] | None
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)


def encode(brokers: dict[int, tuple[str, int]], partitions: list) -> bytes:
    """The plan's bytes: leaders' addresses by id, and [topic, partition, leader, epoch] entries."""
    return json.dumps({"brokers": {str(k): list(v) for k, v in sorted(brokers.items())},
                       "partitions": sorted(partitions)}).encode()


def write(directory: Path, plan: bytes) -> None:
    atomic_write(Path(directory) / FILE_NAME, plan)


def parse(data: bytes) -> dict[int, Source]:
    doc = json.loads(data)
    brokers = {int(k): (v[0], int(v[1])) for k, v in doc.get("brokers", {}).items()}
    sources: dict[int, Source] = {}
    for topic, p, leader, epoch in doc.get("partitions", []):
        source = sources.setdefault(leader, Source(leader, brokers.get(leader)))
        source.partitions[topic, p] = epoch
    return sources


class PlanReader:
    """The latest plan, re-read when the file was replaced."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._stamp = None
        self.sources: dict[int, Source] = {}

    def changed(self) -> bool:
        """Re-read the plan if the file changed; True if it did."""
        stamp = file_stamp(self.path)
        if stamp is None or stamp == self._stamp:
            return False
        try:
            self.sources = parse(self.path.read_bytes())
        except (OSError, ValueError):
            return False  # replaced again meanwhile: the next poll reads the newer one
        self._stamp = stamp
        return True
