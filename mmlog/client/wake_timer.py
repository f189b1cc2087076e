"""A one-shot wake-up at a set time for a selector, armed by another thread without waking the loop.

The producer's `send()` leaves a batch for the next step when it did one less than KICK_INTERVAL ago
(producer_io.py); if no other send() comes, the I/O thread must take it, at a time known when the batch
was left. Telling the I/O thread now would wake it now (and make it take the GIL from the thread calling
send(), every interval of a busy producer); a Linux timerfd in its selector, armed for that time,
wakes it only then, and re-arming it is one syscall that wakes nobody. Elsewhere (no timerfd, or
CLOCK_MONOTONIC not `time.monotonic`'s clock) `WakeTimer.create()` returns None and the caller wakes the
loop at once instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc():
    if not sys.platform.startswith("linux") or time.get_clock_info("monotonic").implementation != \
            "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        # PyDLL: the GIL stays held across these non-blocking calls (releasing it would let a waiting
        # thread take it, which is the very switch this module exists to avoid)
        libc = ctypes.PyDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return create, settime


_LIBC = _libc()


class WakeTimer:
    """A timerfd: `arm(at)` (a `time.monotonic()` time) makes its fd readable at `at`; `clear()` reads it."""

    def __init__(self, fd: int, settime) -> None:
        self.fd = fd
        self._settime = settime
        self._spec = _Itimerspec()

    @classmethod
    def create(cls) -> "WakeTimer | None":
        if _LIBC is None:
            return None
        create, settime = _LIBC
        fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        return None if fd < 0 else cls(fd, settime)

    def fileno(self) -> int:
        return self.fd

    def arm(self, at: float) -> None:
        """Fire once at monotonic time `at` (replacing any earlier setting); a time past fires at once."""
        spec = self._spec
        sec = int(at)
        spec.it_value.tv_sec = sec
        spec.it_value.tv_nsec = max(1, int((at - sec) * 1e9))  # 0/0 would disarm it
        self._settime(self.fd, _TFD_TIMER_ABSTIME, spec, None)

    def clear(self) -> None:
        try:
            os.read(self.fd, 8)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        os.close(self.fd)
