"""Live progress lines and run summaries shared by the perf commands."""

from __future__ import annotations

import sys
import time

import numpy as np

MB = 1_000_000


class Progress:
    """Rewrites one status line on stderr at most every `every` seconds (when stderr is a terminal,
    else prints a line every `every` seconds), and prints the final summary on stdout."""

    def __init__(self, label: str, every: float = 1.0, stream=None) -> None:
        self.label = label
        self.every = every
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self._last = self.start

    def update(self, records: int, nbytes: int, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < self.every:
            return
        self._last = now
        elapsed = max(now - self.start, 1e-9)
        line = (f"{self.label}: {records:,} records, {nbytes / MB:,.1f} MB, "
                f"{records / elapsed:,.0f} msg/s, {nbytes / MB / elapsed:,.1f} MB/s")
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def done(self) -> float:
        """Seconds since start; ends the status line."""
        if self.tty:
            self.stream.write("\n")
        return time.perf_counter() - self.start


def summary(label: str, records: int, nbytes: int, seconds: float, latencies_ms=None) -> str:
    """One summary block: rates, and latency percentiles if given."""
    seconds = max(seconds, 1e-9)
    lines = [f"{label}: {records:,} records, {nbytes / MB:,.1f} MB in {seconds:.2f} s",
             f"  {records / seconds:,.0f} msg/s, {nbytes / MB / seconds:,.1f} MB/s"]
    if latencies_ms is not None and len(latencies_ms):
        p = np.percentile(np.asarray(latencies_ms, dtype=np.float64), [50, 95, 99, 99.9, 100])
        lines.append("  latency ms: p50 {:.2f}  p95 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}".format(*p))
    return "\n".join(lines)
