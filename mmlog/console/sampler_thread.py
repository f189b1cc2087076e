"""What the console's background samplers share: a thread of the main process that calls `tick()` every
`interval_s` with an admin client of the broker's own, made on first use and made again after a failure."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("mmlog.console")


class SamplerThread:
    name = "console-sampler"

    def __init__(self, make_admin, interval_s: float) -> None:
        self.make_admin = make_admin  # () -> an Admin of the broker's own
        self.interval_s = interval_s
        self._admin = None
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def admin(self):
        if self._admin is None:
            self._admin = self.make_admin()
        return self._admin

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(10)
        if self._admin is not None:
            self._admin.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - a cluster hiccup: the next tick tries again
                log.debug("%s: %s: %s", self.name, exc.__class__.__name__, exc)
                if self._admin is not None:
                    self._admin.close()
                    self._admin = None

    def tick(self) -> None:
        raise NotImplementedError
