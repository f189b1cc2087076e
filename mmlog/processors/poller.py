"""A processor's epoll set: descriptors with a payload each, polled as (payload, READ|WRITE) pairs.

What `selectors.EpollSelector` does, without its per-event `SelectorKey` look-ups and
per-call bookkeeping: a processor polls once per pass, thousands of times a second with
one ready socket, and the selector's Python layer cost more than the epoll_wait under it.
Readiness is reported as the selectors module does: an error or hang-up counts as both
readable and writable, so the reader or writer meets the failure.
"""

from __future__ import annotations

import select
import selectors

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT


def _fd(fileobj) -> int:
    fileno = getattr(fileobj, "fileno", None)
    return int(fileobj) if fileno is None else fileno()


def readiness(mask: int) -> int:
    """READ|WRITE of an epoll mask: an error or hang-up counts as both, as the selectors module has it."""
    return (READ if mask & ~_OUT else 0) | (WRITE if mask & ~_IN else 0)


def _epoll_mask(events: int) -> int:
    return (_IN if events & READ else 0) | (_OUT if events & WRITE else 0)


class Poller:
    """An epoll set whose members carry a payload (a connection, or a tag for the processor's own fds)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._payloads: dict[int, object] = {}  # fd -> payload

    def register(self, fileobj, events: int, payload) -> None:
        fd = _fd(fileobj)
        self._epoll.register(fd, _epoll_mask(events))
        self._payloads[fd] = payload

    def modify(self, fileobj, events: int, payload) -> None:
        fd = _fd(fileobj)
        self._epoll.modify(fd, _epoll_mask(events))
        self._payloads[fd] = payload

    def unregister(self, fileobj) -> None:
        """KeyError if it is not registered, as selectors raises."""
        fd = _fd(fileobj)
        del self._payloads[fd]
        try:
            self._epoll.unregister(fd)
        except OSError:
            pass  # closed meanwhile: the kernel dropped it from the set already

    def select(self, timeout: float | None) -> list[tuple[object, int]]:
        """(payload, READ|WRITE) of each ready descriptor; waits up to timeout seconds (None: forever)."""
        payloads = self._payloads
        ready = []
        for fd, events in self._epoll.poll(-1 if timeout is None else timeout, len(payloads) or 1):
            payload = payloads.get(fd)
            if payload is not None:
                ready.append((payload, readiness(events)))
        return ready

    def payload(self, fd: int):
        """The payload registered with fd (None: not registered)."""
        return self._payloads.get(fd)

    def fileno(self) -> int:
        """The epoll descriptor (the compiled loop waits on it too)."""
        return self._epoll.fileno()

    def close(self) -> None:
        self._epoll.close()
