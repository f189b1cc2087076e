"""An iterator run ahead in a thread of its own: the next item is made while the consumer uses this one.

A Spark task's Python worker does two things in turn on one thread: it makes an Arrow batch (receive a
fetched chunk, check its CRCs, decode it, gather its values) and it writes that batch to the JVM. The
write blocks in the socket while the JVM takes the batch, and the making is numba kernels, `recv_into`
and CRC calls, all of which run without the GIL; so a second thread makes batch i + 1 while the first
writes batch i, and a task costs the longer of the two instead of their sum.

`ahead` keeps the order and the items as they are, re-raises the producer's exception in the
consumer, and stops the producer (closing its iterator, in its own thread) when the consumer stops
early or fails.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar("T")

POLL = 0.05  # seconds between a blocked producer's looks at the stop flag
JOIN = 10.0  # seconds the consumer waits, when it stops, for the producer to finish its current item


class _Failed:
    """What the producer hands over when its iterator raised."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


def ahead(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """items, each made in a producer thread up to `depth` items before the consumer asks for it."""
    handed: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handed.put(item, timeout=POLL)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        end = _DONE
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            end = _Failed(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # a generator's finally (a fetcher's connection) runs here, in the thread that ran it
        put(end)

    thread = threading.Thread(target=produce, name="mmlog-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = handed.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join(JOIN)  # daemon: one stuck past this (a fetch timing out) does not hold the worker back
