"""Retention policy: which whole segments to delete, by age and by total size.

Pure functions over segment summaries, so the policy is testable without files.
The active segment is never deleted, and deletion is always a prefix of the log:
the log start offset only moves forward, to the base offset of the first kept
segment.

Retention is the `delete` cleanup policy: a log whose cleanup.policy is `compact`
alone keeps every segment (the log cleaner, `cleaner.py`, shrinks it instead);
`compact,delete` does both.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmlog.config.settings import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    size: int
    max_timestamp: int  # -1 when the segment holds no timestamp


def expired_prefix(segments: list[SegmentSummary], config: LogConfig, now_ms: int) -> int:
    """How many leading (inactive) segments retention deletes now."""
    if not config.delete:
        return 0
    inactive = segments[:-1]
    count = 0
    if config.retention_ms >= 0:
        while count < len(inactive) and now_ms - inactive[count].max_timestamp > config.retention_ms:
            count += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes
        by_size = 0
        while by_size < len(inactive) and excess >= inactive[by_size].size:
            excess -= inactive[by_size].size
            by_size += 1
        count = max(count, by_size)
    return count
