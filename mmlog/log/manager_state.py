"""The state a LogManager's parts share (catalogue, open partitions, topic admin, placement, housekeeping,
gauges), declared once: `LogManager.__init__` sets every attribute, each part reads and changes the ones it
needs."""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from mmlog.config.settings import LogConfig
    from mmlog.log.topic_info import TopicInfo
    from mmlog.log.log_dirs import LogDirHealth
    from mmlog.log.partition import Partition


class ManagerState:
    """Declarations only: the attributes the parts share."""

    log_dirs: list[Path]
    owner: bool
    broker_id: int | None
    defaults: LogConfig
    static_defaults: LogConfig
    dynamic: dict
    _topics: dict[str, TopicInfo]
    _fragments: dict[str, tuple]
    _configs: dict[str, tuple]
    _replicas: Counter | None
    _partitions: OrderedDict[tuple[str, int], Partition]
    _uses: int
    _lock: threading.RLock
    _write_lock: threading.Lock
    _catalogue_stamp: tuple[int, int, int] | None
    _defer_save: int
    _save_pending: bool
    _version: int
    _written: int
    max_open: int | None
    on_evict: Callable[[int], None] | None
    dir_health: LogDirHealth
    _known: set[tuple[str, int]]
    _closed_hw: dict[tuple[str, int], int]
    _not_due: dict[tuple[str, int], tuple[int, int]]
    _due_heaps: tuple[list, list]
    _retention_heap: list
    _retention_due: dict[tuple[str, int], int]
    _pending: dict[str, set]
    _board_keys: dict[int, list] | None
    _board_seen: set | None
    _board_version: int
    looked_at: int
    _slot_of: dict[tuple[str, int], int]
    _segments_seen: dict[tuple[str, int, str], tuple[int, list[int], int]]
