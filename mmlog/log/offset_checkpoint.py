"""Kafka's offset checkpoint files: one offset per partition of a log dir, replaced atomically.

Format (Kafka's OffsetCheckpointFile, version 0):

    0                          version
    <n>                        number of entries
    <topic> <partition> <offset>   n lines

mmlog keeps one: `replication-offset-checkpoint`, the high watermark of every
partition in the log dir, written by the broker's main process every
`replica.high.watermark.checkpoint.interval.ms` and at a clean stop (fsynced, so a
machine crash leaves the old file or the new). A partition whose state page is lost
starts from it, so a restart never shows consumers more than was committed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mmlog.system.files import atomic_write

log = logging.getLogger(__name__)

HIGH_WATERMARKS = "replication-offset-checkpoint"


def read(path: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} of a checkpoint file; empty if there is none or it is corrupt.

    Corrupt (empty, zero-filled, torn: a power loss after a version that renamed before fsync) is read
    as no checkpoint, with a WARNING, as Kafka does: the HW then comes from the state page or the log,
    and the cleaner maps its partitions from their start again."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s), ignored", path, exc)
        return {}
    try:
        lines = text.split("\n")
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            entries[topic, int(partition)] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, {count} announced")
        return entries
    except (IndexError, ValueError) as exc:
        log.warning("%s: corrupt (%s), ignored", path, exc)
        return {}


def write(path: Path, entries: dict[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}\n" for (topic, partition), offset in sorted(entries.items())]
    atomic_write(Path(path), f"0\n{len(lines)}\n{''.join(lines)}".encode())
