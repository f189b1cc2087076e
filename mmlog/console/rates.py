"""Messages in per second per topic, from the sums of its partitions' high watermarks: sampled by
`RateSampler` every INTERVAL_S for every topic (so a topic's rate is known before anyone views it) and as
the console reads them (a topic list, a topic's page); the rate between the last two samples at least
MIN_GAP_S apart, and the last KEEP of them for a chart. Shared by every session (a topic's rate is not
the user's)."""

from __future__ import annotations

import threading
import time
from collections import deque

from mmlog.console import lookups
from mmlog.console.sampler_thread import SamplerThread

INTERVAL_S = 10.0  # a round: one ListOffsets per broker, for every partition it leads

MIN_GAP_S = 1.0
KEEP = 360  # at a sample every 10 s: an hour
MAX_TOPICS = 20_000


class Rates:
    def __init__(self) -> None:
        self._samples: dict[str, deque] = {}  # topic -> (monotonic s, wall ms, sum of high watermarks)
        self._history: dict[str, deque] = {}  # topic -> (wall ms, messages per second)
        self._lock = threading.Lock()

    def sample(self, topic: str, total: int) -> None:
        now, wall = time.monotonic(), int(time.time() * 1000)
        with self._lock:
            samples = self._samples.get(topic)
            if samples is None:
                if len(self._samples) >= MAX_TOPICS:
                    return
                samples = self._samples[topic] = deque(maxlen=2)
            if samples and now - samples[-1][0] < MIN_GAP_S:
                return
            if samples and total >= samples[-1][2]:
                rate = (total - samples[-1][2]) / (now - samples[-1][0])
                self._history.setdefault(topic, deque(maxlen=KEEP)).append((wall, round(rate, 3)))
            samples.append((now, wall, total))

    def rate(self, topic: str) -> float | None:
        """The latest rate, None before two samples."""
        with self._lock:
            history = self._history.get(topic)
            return history[-1][1] if history else None

    def history(self, topic: str) -> list[list]:
        with self._lock:
            return [list(point) for point in self._history.get(topic, ())]

    def forget(self, topic: str) -> None:
        with self._lock:
            self._samples.pop(topic, None)
            self._history.pop(topic, None)


class RateSampler(SamplerThread):
    """The thread sampling every topic's high watermarks into `rates` with the broker's own admin client."""

    name = "console-rates"

    def __init__(self, make_admin, rates: Rates, interval_s: float = INTERVAL_S) -> None:
        super().__init__(make_admin, interval_s)
        self.rates = rates

    def tick(self) -> None:
        """One round: every topic's high watermarks summed and sampled (a topic missing a partition's
        answer is left for the next round)."""
        admin = self.admin
        admin.cluster.refresh(None, allow_auto_create=False)
        topics = {name: info.partitions for name, info in admin.cluster.topics.items() if info.error == 0}
        latest = lookups.offsets(admin, [(t, p) for t, n in topics.items() for p in range(n)], lookups.LATEST)
        for name, n in topics.items():
            mine = [latest.get((name, p)) for p in range(n)]
            if None not in mine:
                self.rates.sample(name, sum(mine))
