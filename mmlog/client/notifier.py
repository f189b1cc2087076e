"""A wake-up for a client's event loop: one socketpair another thread can poke."""

from __future__ import annotations

import selectors
import socket
from typing import Callable


class Notifier:
    """The read end of a socketpair in a client's selector: another thread (the heartbeat thread,
    `Consumer.wakeup`'s caller, a producer's `send()`) wakes a blocked select, which then runs
    `on_wake` if one is given.

    It looks like a Channel to the event loops (closed, events, on_readable, on_writable)."""

    closed = False

    def __init__(self, on_wake: Callable[[], None] | None = None) -> None:
        self.sock, self._w = socket.socketpair()
        self.sock.setblocking(False)
        self._w.setblocking(False)
        self._on_wake = on_wake

    def events(self) -> int:
        return selectors.EVENT_READ

    def notify(self) -> None:
        try:
            self._w.send(b"!")
        except (BlockingIOError, OSError):
            pass  # already has a byte waiting (or closing): the poll wakes anyway

    def on_readable(self) -> None:
        try:
            while self.sock.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        if self._on_wake is not None:
            self._on_wake()

    def on_writable(self) -> None:
        pass

    def close(self) -> None:
        self.sock.close()
        self._w.close()
