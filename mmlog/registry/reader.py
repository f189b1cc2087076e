"""The reader thread: consumes `_schemas` from its start with mmlog's own client and applies every record
to this broker's view, for as long as the broker runs.

The view is `ready` once it holds what the topic held when the reader first looked (at once when there was
no topic yet): until then the registry answers nothing (api.py), as Confluent's waits for its store at
start. Until the topic exists (no write yet, anywhere) it looks for it every WAIT_S. A failure (a leader moving,
a broker restarting) drops the consumer and starts a new one at the view's own position after a pause:
the view never applies a record twice nor skips one.
"""

from __future__ import annotations

import logging
import threading

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.records import TopicPartition

log = logging.getLogger("mmlog.registry")

WAIT_S = 0.5  # between looks for the topic, and after a failure
POLL_S = 0.5


class Reader:
    def __init__(self, view, bootstrap: str, security: dict, topic: str) -> None:
        self.view = view
        self.bootstrap = bootstrap
        self.security = security
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self._stop = threading.Event()
        self._ready_at: int | None = None  # the offset the view must reach to be ready
        self.thread = threading.Thread(target=self._run, name="registry-reader", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = self._open()
                    if consumer is None:
                        self._stop.wait(WAIT_S)
                        continue
                for record in consumer.poll(POLL_S):
                    self.view.apply(record.offset, record.key, record.value)
                self.view.advance(consumer.position(self.tp, timeout=POLL_S))
                if self._ready_at is not None and self.view.applied >= self._ready_at:
                    self.view.ready.set()
            except Exception as exc:  # noqa: BLE001 - the cluster moving under us: start again where we were
                log.info("registry reader: %s: %s; reading again in %.1f s", exc.__class__.__name__, exc, WAIT_S)
                consumer = _close(consumer)
                self._stop.wait(WAIT_S)
        _close(consumer)

    def _open(self) -> Consumer | None:
        """A consumer at the view's position, or None while the topic does not exist."""
        with Admin(self.bootstrap, client_id="mmlog-registry", timeout=5, **self.security) as admin:
            if self.topic not in admin.list_topics():
                if self._ready_at is None:
                    self.view.ready.set()  # nothing written yet: nothing to wait for
                return None
        consumer = Consumer(self.bootstrap, client_id="mmlog-registry", auto_offset_reset="earliest",
                            fetch_max_wait_ms=200, request_timeout_ms=5000, **self.security)
        consumer.assign([self.tp])
        consumer.seek(self.tp, self.view.applied)
        if self._ready_at is None:
            self._ready_at = consumer.end_offsets([self.tp])[self.tp]
        return consumer


def _close(consumer) -> None:
    """Close a consumer if there is one; None, the consumer the caller holds from now on."""
    if consumer is not None:
        try:
            consumer.close()
        except Exception:  # noqa: BLE001, S110 - a consumer that fails to close is dropped all the same
            pass
