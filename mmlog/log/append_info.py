"""What an append answers (`AppendInfo`), and the offsets a list of batches takes."""

from __future__ import annotations

from typing import NamedTuple


class AppendInfo(NamedTuple):
    """Where an append landed (a tuple: a group commit makes one per produce request)."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    batches: int
    records: int


def offsets_taken(headers: list) -> int:
    """Offsets the batches take (lastOffsetDelta + 1 each)."""
    if len(headers) == 1:
        return headers[0].last_offset_delta + 1
    return sum(h.last_offset_delta + 1 for h in headers)
