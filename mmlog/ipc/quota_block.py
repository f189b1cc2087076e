"""Client quota rates shared by every processor of a broker: sampled windows in one shared block.

A client's connections may land on any processor, so its rate is counted where all of
them can add to it and read it. The main process makes the block before forking: a
memfd, mapped shared, holding

    keys    uint64[SLOTS]                  the sensor in each slot (a hash of its name; 0 = free)
    ids     int64[SLOTS, processors, W]    the window each cell counts (now_ms // window_ms)
    values  float64[SLOTS, processors, W]  what was recorded in that window

W is `quota.window.num` (11) windows of `quota.window.size.seconds` (1 s), as Kafka's
quota sensors sample. Each processor writes only its own row of each slot (one writer
per cell: no lock on the hot path, as the metrics blocks do); a reader sums every
processor's cells of the last W windows. A cell whose window is over is reset by its
writer when it records into that position again.

The rate is Kafka's `Rate` over a `SampledStat`: the sum of the live windows divided
by the time since the oldest live window began, counted as at least W-1 whole windows
(so a new client cannot be throttled for its first burst, nor an idle one measured
over a short span). Windows here are aligned to the clock (Kafka starts a sample at
its first record): the span differs from Kafka's by less than one window.

The arithmetic is one numba kernel, `record_rate` (record, then sum the live windows;
plain-Python reference `record_rate_py`, tests compare them): a quota'd client's request
costs a few microseconds, not a numpy call per step. `warm()` compiles it before the fork.

Slots are claimed under a POSIX record lock on the memfd (the kernel releases it if
its holder dies), once per sensor; a slot whose windows are all older than an hour
is reused. With every slot in use, sensors share one (they are then throttled
together, conservatively) and a warning says so.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os

import numpy as np
from numba import njit

log = logging.getLogger(__name__)

SLOTS = 1024
STALE_MS = 3_600_000  # a sensor unused this long gives up its slot (Kafka expires quota sensors after an hour)
_PROBES = 32


def record_rate_py(ids, values, slot, writer, now_ms, window_ms, value):
    """Add value (if not 0) to the writer's current window of the slot, then (rate per second, span in ms)
    of the slot over every writer's live windows: Kafka's Rate over a SampledStat (module docstring)."""
    windows = ids.shape[2]
    window = now_ms // window_ms
    if value != 0.0:
        at = window % windows
        if ids[slot, writer, at] != window:
            ids[slot, writer, at] = window
            values[slot, writer, at] = 0.0
        values[slot, writer, at] += value
    total = 0.0
    oldest = window
    for p in range(ids.shape[1]):
        for w in range(windows):
            i = ids[slot, p, w]
            if i > window - windows:
                total += values[slot, p, w]
                if i < oldest:
                    oldest = i
    elapsed = now_ms - oldest * window_ms
    full = elapsed // window_ms
    if full < windows - 1:
        elapsed += (windows - 1 - full) * window_ms
    span = max(elapsed, 1)
    return total * 1000.0 / span, span


record_rate = njit(cache=True, nogil=True)(record_rate_py)


def warm() -> None:
    """Compile the kernel (before forking: processors inherit it)."""
    record_rate(np.zeros((1, 1, 2), np.int64), np.zeros((1, 1, 2)), 0, 0, 1000, 1000, 1.0)


def sensor_key(name: str) -> int:
    """A sensor name's 64-bit key (never 0, which marks a free slot)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") or 1


class QuotaBlock:
    """Per-sensor sampled windows for `processors` writers, shared across fork."""

    def __init__(self, processors: int, windows: int = 11, window_ms: int = 1000, slots: int = SLOTS) -> None:
        self.processors, self.windows, self.window_ms, self.slots = processors, windows, window_ms, slots
        cells = slots * processors * windows
        size = 8 * (slots + 2 * cells)
        self._fd = os.memfd_create("mmlog-quotas", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._page = mmap.mmap(self._fd, size)  # MAP_SHARED: pages are touched only as sensors use them
        self.keys = np.frombuffer(self._page, np.uint64, slots, 0)
        self.ids = np.frombuffer(self._page, np.int64, cells, 8 * slots).reshape(slots, processors, windows)
        self.values = np.frombuffer(self._page, np.float64, cells, 8 * (slots + cells)).reshape(
            slots, processors, windows)
        warm()

    # ------------------------------------------------------------ slots

    def slot(self, name: str, now_ms: int) -> int:
        """The slot of a sensor, claimed if it has none (under the lock: claims from two processors race)."""
        key = sensor_key(name)
        start = key % self.slots
        probes = [(start + i) % self.slots for i in range(min(_PROBES, self.slots))]
        for s in probes:
            if self.keys[s] == key:
                return s
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            for s in probes:  # again, holding the lock
                if self.keys[s] == key:
                    return s
            for s in probes:
                if self.keys[s] == 0 or self.ids[s].max() * self.window_ms < now_ms - STALE_MS:
                    self.ids[s] = 0
                    self.values[s] = 0
                    self.keys[s] = key
                    return s
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        log.warning("quota block full: sensor %s shares slot %d", name, start)
        return start

    # ------------------------------------------------------------ rates

    def record(self, slot: int, writer: int, now_ms: int, value: float) -> tuple[float, int]:
        """Add value to this writer's current window of the slot; (rate per second, span in ms) after it."""
        return record_rate(self.ids, self.values, slot, writer, now_ms, self.window_ms, float(value))

    def measure(self, slot: int, now_ms: int) -> tuple[float, int]:
        """(rate per second, the span in ms it is measured over) of a slot, over every writer."""
        return record_rate(self.ids, self.values, slot, 0, now_ms, self.window_ms, 0.0)

    def throttle_ms(self, slot: int, now_ms: int, limit: float, measured: tuple[float, int] | None = None) -> int:
        """How long the slot's client must wait for its rate to fall back to `limit` (Kafka's
        QuotaUtils.throttleTime: (rate - limit) / limit * span), 0 within the quota."""
        rate, span = measured or self.measure(slot, now_ms)
        if rate <= limit:
            return 0
        return int(round((rate - limit) / limit * span))
