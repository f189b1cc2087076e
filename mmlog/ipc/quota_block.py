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

log = logging.getLogger(__name__)

SLOTS = 1024
STALE_MS = 3_600_000  # a sensor unused this long gives up its slot (Kafka expires quota sensors after an hour)
_PROBES = 32


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

    def record(self, slot: int, writer: int, now_ms: int, value: float) -> None:
        """Add value to this writer's current window of the slot."""
        window = now_ms // self.window_ms
        at = window % self.windows
        ids, values = self.ids[slot, writer], self.values[slot, writer]
        if ids[at] != window:
            ids[at] = window
            values[at] = 0.0
        values[at] += value

    def measure(self, slot: int, now_ms: int) -> tuple[float, int]:
        """(rate per second, the span in ms it is measured over) of a slot, over every writer."""
        window = now_ms // self.window_ms
        ids = self.ids[slot]
        live = ids > window - self.windows
        total = float(self.values[slot][live].sum())
        oldest = int(ids[live].min()) if live.any() else window
        elapsed = now_ms - oldest * self.window_ms
        full = elapsed // self.window_ms
        if full < self.windows - 1:
            elapsed += (self.windows - 1 - full) * self.window_ms
        span = max(elapsed, 1)
        return total * 1000.0 / span, span

    def throttle_ms(self, slot: int, now_ms: int, limit: float) -> int:
        """How long the slot's client must wait for its rate to fall back to `limit` (Kafka's
        QuotaUtils.throttleTime: (rate - limit) / limit * span), 0 within the quota."""
        rate, span = self.measure(slot, now_ms)
        if rate <= limit:
            return 0
        return int(round((rate - limit) / limit * span))
