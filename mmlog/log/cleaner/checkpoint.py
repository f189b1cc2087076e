"""The log cleaner's checkpoint: per log dir, the first dirty offset of every partition it has cleaned.

`cleaner-offset-checkpoint` in each data directory, Kafka's file and format (see
`offset_checkpoint.py`): `<topic> <partition> <first dirty offset>` per line, where
the first dirty offset is where the last cleaning's offset map ended. Everything
below it has been cleaned once; the next cleaning maps keys from it on.

Only the cleaner process writes it (atomically, fsynced). A partition named in it
may hold offset gaps (removed batches): recovery then checks that offsets
increase, not that they run on densely. The cleaner names a partition here before
its first swap, so a crash can never leave gaps in a partition the file does not
name. A stale entry (a crash after a swap, before the entry moved) only makes the
next cleaning map again keys it already cleaned.
"""

from __future__ import annotations

from pathlib import Path

from mmlog.log import offset_checkpoint

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def path(log_dir: Path) -> Path:
    return Path(log_dir) / CLEANER_CHECKPOINT


def read(log_dir: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): first dirty offset} of a log dir (empty when there is none)."""
    return offset_checkpoint.read(path(log_dir))


def write(log_dir: Path, entries: dict[tuple[str, int], int]) -> None:
    offset_checkpoint.write(path(log_dir), entries)


def partition_key(partition_dir: Path) -> tuple[str, int] | None:
    """(topic, partition) of a `<topic>-<partition>` directory."""
    topic, _, number = Path(partition_dir).name.rpartition("-")
    return (topic, int(number)) if topic and number.isdigit() else None


def was_cleaned(partition_dir: Path) -> bool:
    """Whether the cleaner has ever cleaned (and so may have left gaps in) this partition."""
    key = partition_key(partition_dir)
    return key is not None and key in read(Path(partition_dir).parent)
