"""The broker's own counters over the last hour: rates and latency percentiles sampled every INTERVAL_S.

A thread of the main process reads the shared metrics block's totals (ipc/metrics_block.py: the sum of
every process's counters, under the block's own fold lock, a few microseconds) -- never what a scrape
adds beyond them (partition states, the coordinator's offsets, the store), so it takes no lock of the
control plane. Each sample keeps only what changed since the previous one: bytes and records in and
out per second, requests per second and the 50th/99th/99.9th percentile of each API's total time, in a
fixed ring of WINDOW_S / INTERVAL_S samples.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

import numpy as np

from mmlog.ipc import metrics_block as mb
from mmlog.metrics.families import api_name

log = logging.getLogger("mmlog.console")

WINDOW_S = 3600.0
INTERVAL_S = 10.0
QUANTILES = (0.5, 0.99, 0.999)
RATES = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")
_HISTS = np.array([mb.latency_at(mb.TOTAL, api) for api in range(mb.MAX_API)])


def percentile(buckets, q: float) -> float:
    """The q-quantile of a histogram's bucket counts, in ms, interpolated within its bucket (the last
    bound for the +Inf bucket)."""
    total = int(buckets.sum())
    if not total:
        return 0.0
    rank, seen, low = q * total, 0, 0.0
    for i, count in enumerate(int(c) for c in buckets):
        high = mb.BOUNDS_US[min(i, len(mb.BOUNDS_US) - 1)] / 1000
        if count and seen + count >= rank:
            return round(low + (high - low) * (rank - seen) / count, 3)
        seen += count
        low = high
    return low


class MetricsHistory:
    """The ring of samples and the thread filling it from `totals()` (the metrics block's summed words)."""

    def __init__(self, totals, interval_s: float = INTERVAL_S, window_s: float = WINDOW_S) -> None:
        self.totals = totals
        self.interval_s = interval_s
        self.samples: deque = deque(maxlen=int(window_s / interval_s))
        self._last: tuple[float, np.ndarray] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.sample()
        self.thread = threading.Thread(target=self._run, name="console-metrics", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a sample lost; the broker goes on
                log.exception("console metrics sample failed")

    def sample(self, now: float | None = None) -> dict | None:
        """Take one sample (the first only sets the baseline); returns it."""
        now = time.time() if now is None else now
        words = np.asarray(self.totals(), dtype=np.int64).copy()
        last, self._last = self._last, (now, words)
        if last is None or now <= last[0]:
            return None
        seconds, delta = now - last[0], words - last[1]
        point = {"time": now, **{name: max(0, int(delta[mb.SCALAR[name]])) / seconds for name in RATES},
                 "apis": self._apis(delta, seconds)}
        with self._lock:
            self.samples.append(point)
        return point

    @staticmethod
    def _apis(delta, seconds: float) -> dict:
        """Per API that had requests in the interval: requests per second and its latency percentiles."""
        out = {}
        for api in np.nonzero(delta[mb.REQUESTS:mb.REQUESTS + mb.MAX_API] > 0)[0]:
            buckets = delta[_HISTS[api]:_HISTS[api] + mb.BUCKETS]
            out[api_name(int(api))] = {"rate": int(delta[mb.REQUESTS + api]) / seconds,
                                       **{f"p{q * 100:g}": percentile(buckets, q) for q in QUANTILES}}
        return out

    def series(self, since: float = 0.0) -> list[dict]:
        with self._lock:
            return [s for s in self.samples if s["time"] >= since]
