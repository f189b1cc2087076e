"""Work that would hold a processor's loop for milliseconds (a PLAIN password's PBKDF2), run on a
helper thread; its result comes back to the loop through a pipe the loop polls."""

from __future__ import annotations

import os
import queue
from typing import Any, Callable

Done = Callable[[Any, "BaseException | None"], None]


class Offloader:
    """One helper thread, made on first use, and the pipe that tells the loop its work finished."""

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        self._helper = None  # a one-thread pool, made on first use
        self._finished: queue.SimpleQueue = queue.SimpleQueue()  # (done, future) finished on the helper
        self.fd, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # the loop polls fd

    def submit(self, fn: Callable[[], Any], done: Done) -> None:
        """Run fn() on the helper thread (it must touch nothing the loop uses meanwhile); `finish`, in
        the loop, then calls done(result, None) or done(None, exception)."""
        if self._helper is None:
            from concurrent.futures import ThreadPoolExecutor

            self._helper = ThreadPoolExecutor(1, thread_name_prefix=self.thread_name)

        def finished(future) -> None:
            self._finished.put((done, future))
            try:
                os.write(self._wake_w, b"x")
            except BlockingIOError:
                pass  # the pipe is full of wake-ups already

        self._helper.submit(fn).add_done_callback(finished)

    def finish(self, failed: Callable[[None, BaseException], None]) -> None:
        """In the loop, once fd is readable: run the finished work's `done`; one that raises goes to
        failed(None, exception)."""
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass
        while not self._finished.empty():
            done, future = self._finished.get()
            exc = future.exception()
            try:
                done(None if exc else future.result(), exc)
            except Exception as failure:  # noqa: BLE001 - contained: the processor logs it
                failed(None, failure)
