"""Talking to systemd without libsystemd: sd_notify(3) datagrams and the service watchdog.

Under `Type=notify` the broker says READY=1 once it serves and STOPPING=1 when it stops.
Under `WatchdogSec=` systemd sets WATCHDOG_USEC (and WATCHDOG_PID, the pid it watches)
and kills the service (SIGABRT, then a restart under Restart=on-failure) when no
WATCHDOG=1 comes within that interval. The supervisor feeds it every half interval,
only while every essential loop of the broker turns (`liveness.py`): a broker whose
main thread hangs, or whose control thread has not turned within the interval, is
restarted even when it cannot say so itself.
"""

from __future__ import annotations

import logging
import os
import socket
import time

log = logging.getLogger("mmlog.broker")


def notify(message: str) -> None:
    """sd_notify(3): a datagram to $NOTIFY_SOCKET, if set."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(address)
            sock.sendall(message.encode())
        except OSError as exc:
            log.warning("cannot notify systemd: %s", exc)


class Watchdog:
    """Feeds systemd's watchdog every half interval while the broker is healthy; does nothing without one."""

    def __init__(self, interval_s: float | None) -> None:
        self.interval_s = interval_s
        self._next = 0.0

    @classmethod
    def from_environment(cls) -> "Watchdog":
        """The watchdog systemd set for this process (WATCHDOG_USEC, WATCHDOG_PID absent or ours), or none."""
        usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return cls(None)
        try:
            return cls(int(usec) / 1e6)
        except ValueError:
            log.warning("WATCHDOG_USEC=%r is not a number: systemd's watchdog is not fed", usec)
            return cls(None)

    def feed(self, liveness) -> None:
        """WATCHDOG=1 when half an interval has passed, if every essential loop turned within one."""
        if self.interval_s is None:
            return
        now = time.monotonic()
        if now >= self._next and liveness.healthy(self.interval_s, now):
            notify("WATCHDOG=1")
            self._next = now + self.interval_s / 2
