"""At most N lines a second of one kind of warning per processor; the rest counted and summed up.

A client that can make the broker log (failed logins, failed TLS handshakes) must not be able to
flood the journal: the first `per_second` lines of each second are written, the others counted, and
the count is written with the next line after the second is over.
"""

from __future__ import annotations

import time


class LogCap:
    def __init__(self, log, per_second: int, what: str) -> None:
        self.log, self.per_second, self.what = log, per_second, what
        self._second = 0.0
        self._written = 0
        self._dropped = 0

    def __call__(self, level: int, message: str, *args, **kwargs) -> None:
        now = time.monotonic()
        if now - self._second >= 1.0:
            if self._dropped:
                self.log.log(level, "%d more %s were not logged (over %d a second)", self._dropped, self.what,
                             self.per_second)
            self._second, self._written, self._dropped = now, 0, 0
        if self._written >= self.per_second:
            self._dropped += 1
            return
        self._written += 1
        self.log.log(level, message, *args, **kwargs)
