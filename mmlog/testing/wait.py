"""The one way a test waits for something to happen: poll a condition until it holds, or fail saying what
was awaited and what was last seen.

The deadline is not a claim about speed: it only turns a hang into a failure, so it is generous (a loaded
2-core machine runs brokers several times slower than an idle one). A test asserts what happened, never how
fast it did.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

TIMEOUT = 30.0  # seconds; a test that waits for something slow (a session expiry, a catch-up) passes more


def wait_for(condition: Callable[[], T], timeout: float = TIMEOUT, what: str = "the condition",
             interval: float = 0.05, show: Callable[[], object] | None = None,
             retry: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """Call condition() until it returns something truthy, and return that. An exception of a retry type from
    condition() is a try that failed (brokers coming and going); the last one is reported if the deadline
    passes, with the last value seen and, if given, what show() returns then. Others propagate."""
    deadline = time.monotonic() + timeout
    last, error = None, None
    while True:
        try:
            last, error = condition(), None
            if last:
                return last
        except retry as exc:  # a failed try: try again until the deadline
            error = exc
        if time.monotonic() > deadline:
            seen = f"; last seen: {show()!r}" if show else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} "
                                 f"(last value {last!r}, last error {error!r}){seen}") from error
        time.sleep(interval)
