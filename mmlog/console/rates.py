"""Messages in per second per topic, from the sums of its partitions' high watermarks sampled as the console
reads them (a topic list, a topic's page): the rate between the last two samples at least MIN_GAP_S apart,
and the last KEEP of them for a chart. Shared by every session (a topic's rate is not the user's)."""

from __future__ import annotations

import threading
import time
from collections import deque

MIN_GAP_S = 1.0
KEEP = 360  # at a sample every 5 s: half an hour
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
