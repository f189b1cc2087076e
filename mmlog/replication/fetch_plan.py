"""The fetch plan: which partitions this broker follows, from which leader, in which epoch.

Written by the main process (`cluster/replicas.py`) as `fetch-plan.json`
in the first data dir, atomically; the fetcher re-reads it when it was replaced
(a `stat` per poll).

    {"brokers": {"2": ["127.0.0.1", 9093], ...},
     "partitions": [["topic", 0, 2, 7], ...],      # topic, partition, leader id, leader epoch
     "throttle": {"rate": 1048576, "partitions": [["topic", 0], ...]}}   # optional (`throttle.py`)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mmlog.system.files import atomic_write, file_stamp

FILE_NAME = "fetch-plan.json"


@dataclass
class Source:
    """A leader broker and the partitions (topic, partition) -> leader epoch we follow on it."""

    leader_id: int
    address: tuple[str, int] | None
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)


def encode(brokers: dict[int, tuple[str, int]], partitions: list, throttle: tuple[int, list] | None = None) -> bytes:
    """The plan's bytes: leaders' addresses by id, [topic, partition, leader, epoch] entries, and the
    throttle (rate, [[topic, partition], ...]) if any."""
    doc = {"brokers": {str(k): list(v) for k, v in sorted(brokers.items())}, "partitions": sorted(partitions)}
    if throttle is not None:
        doc["throttle"] = {"rate": throttle[0], "partitions": sorted(throttle[1])}
    return json.dumps(doc).encode()


def write(directory: Path, plan: bytes) -> None:
    atomic_write(Path(directory) / FILE_NAME, plan)


def parse_throttle(data: bytes) -> tuple[int | None, list[tuple[str, int]]]:
    """(rate or None, throttled partitions) of a plan."""
    throttle = json.loads(data).get("throttle") or {}
    return throttle.get("rate"), [(t, p) for t, p in throttle.get("partitions", [])]


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
        self.throttle: tuple[int | None, list[tuple[str, int]]] = (None, [])

    def changed(self) -> bool:
        """Re-read the plan if the file changed; True if it did."""
        stamp = file_stamp(self.path)
        if stamp is None or stamp == self._stamp:
            return False
        try:
            data = self.path.read_bytes()
            self.sources, self.throttle = parse(data), parse_throttle(data)
        except (OSError, ValueError):
            return False  # replaced again meanwhile: the next poll reads the newer one
        self._stamp = stamp
        return True
