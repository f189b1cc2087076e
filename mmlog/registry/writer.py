"""The one writer: the registry of the broker leading `_schemas`-0 appends every change, one at a time.

A change is decided against a view that has caught up with the topic's end (so a new leader knows every
id handed out before it), written as one batch (its records land together or not at all) with acks=all,
and answered only once this broker's view has applied it. The topic is created on first use: one
partition, `cleanup.policy=compact`, the cluster's default replication factor and min.insync.replicas.
"""

from __future__ import annotations

import logging
import threading

from mmlog.client.admin import Admin
from mmlog.client.admin_offsets import LATEST
from mmlog.client.producer import Producer
from mmlog.errors import MessageTooLarge, RecordListTooLarge, TopicAlreadyExists
from mmlog.registry import errors

log = logging.getLogger("mmlog.registry")

MAX_REQUEST = 8 * 1024 * 1024  # one change's records, in one batch


class Writer:
    def __init__(self, view, bootstrap: str, security: dict, topic: str, timeout_s: float) -> None:
        self.view = view
        self.bootstrap = bootstrap
        self.security = security
        self.topic = topic
        self.timeout = timeout_s
        self.lock = threading.Lock()  # one change at a time; never the control plane's locks
        self.reserved = 0  # the highest id this writer handed to a write, acknowledged or not
        self._admin: Admin | None = None
        self._producer: Producer | None = None
        self._topic_known = False

    # ------------------------------------------------------------ the cluster

    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.bootstrap, client_id="mmlog-registry", timeout=self.timeout, **self.security)
        return self._admin

    def ensure_topic(self) -> None:
        if self._topic_known:
            return
        admin = self.admin()
        if self.topic not in admin.list_topics():
            try:
                admin.create_topic(self.topic, 1, {"cleanup.policy": "compact"})
                log.info("created %s (the schema registry's store)", self.topic)
            except TopicAlreadyExists:
                pass
        self._topic_known = True

    def leader(self) -> int:
        """The broker leading the topic's partition now (-1: none)."""
        admin = self.admin()
        admin.cluster.refresh([self.topic], allow_auto_create=False)
        info = admin.cluster.topic(self.topic, allow_auto_create=False, wait=self.timeout)
        return info.leaders[0] if info.leaders else -1

    def reset(self) -> None:
        """After a failure: new connections for the next change (a leader may have moved)."""
        admin, producer, self._admin, self._producer = self._admin, self._producer, None, None
        self._topic_known = False
        for close in (admin and admin.close, producer and (lambda: producer.close(0))):
            if close:
                try:
                    close()
                except Exception:  # noqa: BLE001, S110 - dropped all the same
                    pass

    # ------------------------------------------------------------ changes

    def catch_up(self) -> None:
        """Wait until the view holds everything the topic holds (errors.timeout if it does not in time)."""
        end = self.admin().offsets(self.topic, LATEST)[0]
        if not self.view.wait_applied(end, self.timeout):
            raise errors.timeout(f"the registry's view did not reach offset {end} of {self.topic}")

    def next_id(self) -> int:
        self.reserved = max(self.reserved, self.view.max_id) + 1
        return self.reserved

    def append(self, pairs: list[tuple[bytes, bytes | None]]) -> int:
        """Write the records as one batch; the offset after the last, once every in-sync replica has them."""
        producer = self._producer
        if producer is None:
            producer = self._producer = Producer(
                self.bootstrap, client_id="mmlog-registry", acks="all", linger_ms=60_000, batch_size=MAX_REQUEST,
                max_request_size=MAX_REQUEST, request_timeout_ms=self.timeout * 1000,
                delivery_timeout_ms=self.timeout * 1000, max_block_ms=self.timeout * 1000, **self.security)
        try:
            futures = [producer.send(self.topic, value=value, key=key, partition=0) for key, value in pairs]
            producer.flush(self.timeout)  # one batch: flush closes the batch every record went into
            return futures[-1].get(0).offset + 1
        except (MessageTooLarge, RecordListTooLarge) as exc:  # an answer, not a failure to retry
            self.reset()  # the producer's sequences start afresh
            raise errors.schema_too_large(f"{sum(len(v or b'') for _, v in pairs)} bytes: {exc}") from None

    def close(self) -> None:
        self.reset()
