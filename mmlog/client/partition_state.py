"""The consumer's state for one assigned partition: its position, its fetch offset, its pending reset.

Kept apart from the consumer so the fetch, position and group parts (fetcher.py, positions.py,
consumer_group.py) share one definition of what a partition's state means."""

from __future__ import annotations

from mmlog.client.records import TopicPartition

EARLIEST = -2  # ListOffsets timestamps
LATEST = -1
COMMITTED = "committed"  # a pending reset that asks the group's committed offset (OffsetFetch), not ListOffsets
LISTED = (EARLIEST, LATEST)  # the resets ListOffsets answers
MAX_BUFFERED_CHUNKS = 2  # per partition: the one being handed over and the next


class PartitionState:
    """The consumer's state for one assigned partition."""

    __slots__ = ("tp", "position", "fetch_offset", "reset", "resetting", "epoch", "leader", "fetching",
                 "halted", "error", "buffered", "fetch_bytes", "retry_at", "high_watermark", "committed")

    def __init__(self, tp: TopicPartition, fetch_bytes: int) -> None:
        self.tp = tp
        self.position: int | None = None  # next offset for the application
        self.fetch_offset: int | None = None  # next offset to fetch
        self.reset: int | str | None = None  # EARLIEST/LATEST: a ListOffsets is due; COMMITTED: an OffsetFetch
        self.resetting = False  # that ListOffsets (or OffsetFetch) is in flight
        self.epoch = 0  # bumped on every jump of the position; older data is dropped
        self.leader = -1  # node id, -1 unknown
        self.fetching = False  # part of a Fetch in flight
        self.halted = False  # an error is queued for the application: fetch nothing more until a seek
        self.error: BaseException | None = None  # raised by poll until a seek
        self.buffered = 0  # chunks waiting in the consumer's ready queue
        self.fetch_bytes = fetch_bytes  # partition_max_bytes (doubled while no whole batch fits)
        self.retry_at = 0.0  # backoff after a retriable error
        self.high_watermark = -1
        self.committed: int | None = None  # the offset this consumer last committed (or read) for it

    def jump(self, offset: int | None, reset: int | None = None) -> None:
        """Move to offset (or to a pending reset), dropping everything fetched for the old position."""
        self.epoch += 1
        self.position = self.fetch_offset = offset
        self.reset = reset
        self.halted = False
        self.error = None
        self.retry_at = 0.0

    @property
    def fetchable(self) -> bool:
        return (self.fetch_offset is not None and self.reset is None and not self.fetching and not self.halted
                and self.buffered < MAX_BUFFERED_CHUNKS)
