"""Consumer-group lag over the last hour: a bounded ring of samples per group, and the sampler keeping it.

The sampler is a thread of the main process with its own admin client (the broker's inter-broker
credentials); it takes no lock of the control plane, only asks the brokers as any client would. Every
INTERVAL_S it samples the groups viewed in the last VIEWED_S, the TOP groups by their last known lag, and
a rolling slice of SWEEP other groups (so that each group's lag is known within a few minutes without
asking for all of them at once). Memory is bounded: at most MAX_GROUPS groups of WINDOW_S / spacing
points each, the least recently sampled forgotten first. A group's page records a point too when viewed
(at most one a second), so its chart follows what the page shows.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

from mmlog.console.groups import lags, total_lag
from mmlog.console.sampler_thread import SamplerThread

WINDOW_S = 3600.0
INTERVAL_S = 5.0
MIN_SPACING_S = 1.0  # no two points of a group closer than this
VIEWED_S = 60.0
TOP = 20
SWEEP = 50
MAX_GROUPS = 200
POINTS = int(WINDOW_S / MIN_SPACING_S)


class LagHistory:
    """group -> [(unix time, total lag)] for the last WINDOW_S, for at most MAX_GROUPS groups."""

    def __init__(self, max_groups: int = MAX_GROUPS, window_s: float = WINDOW_S) -> None:
        self.max_groups = max_groups
        self.window_s = window_s
        self._points: OrderedDict[str, deque] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, group: str, lag: int, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            points = self._points.get(group)
            if points is None:
                points = self._points[group] = deque(maxlen=POINTS)
                while len(self._points) > self.max_groups:
                    self._points.popitem(last=False)
            self._points.move_to_end(group)
            if points and now - points[-1][0] < MIN_SPACING_S:
                points[-1] = (points[-1][0], lag)  # the latest value, not a denser series
            else:
                points.append((now, lag))
            while points and points[0][0] < now - self.window_s:
                points.popleft()

    def series(self, group: str, now: float | None = None) -> list[tuple[float, int]]:
        cutoff = (time.time() if now is None else now) - self.window_s
        with self._lock:
            return [p for p in self._points.get(group, ()) if p[0] >= cutoff]

    def groups(self) -> list[str]:
        with self._lock:
            return list(self._points)


class LagSampler(SamplerThread):
    """The thread sampling lag into a LagHistory; `viewed(group)` marks a group someone is looking at."""

    name = "console-lag"

    def __init__(self, make_admin, history: LagHistory, interval_s: float = INTERVAL_S) -> None:
        super().__init__(make_admin, interval_s)
        self.history = history
        self.known: dict[str, int] = {}  # group -> its last sampled lag (for the top groups)
        self._viewed: dict[str, float] = {}
        self._cursor = 0

    def viewed(self, group: str, lag: int | None = None) -> None:
        self._viewed[group] = time.monotonic()
        if lag is not None:
            self.known[group] = lag
            self.history.record(group, lag)

    def tick(self) -> None:
        """One round: the groups to sample now, their lag recorded."""
        names = list(self.admin.list_groups())
        for gone in set(self.known) - set(names):
            del self.known[gone]
        now = time.monotonic()
        self._viewed = {g: t for g, t in self._viewed.items() if now - t < VIEWED_S}
        sweep = names[self._cursor:self._cursor + SWEEP] if names else []
        self._cursor = self._cursor + SWEEP if self._cursor + SWEEP < len(names) else 0
        top = sorted(self.known, key=self.known.get, reverse=True)[:TOP]
        present = set(names)
        chosen = [g for g in dict.fromkeys([*self._viewed, *top, *sweep]) if g in present]
        for group, parts in lags(self.admin, chosen).items():
            self.known[group] = total_lag(parts)
        ranked = set(sorted(self.known, key=self.known.get, reverse=True)[:TOP]) | set(self._viewed)
        for group in chosen:
            if group in ranked:
                self.history.record(group, self.known[group])
