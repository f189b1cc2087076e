"""The marker sender: WriteTxnMarkers from the transaction coordinator to partition leaders.

The control thread must never wait on another broker, so requests go to a thread
of their own, one at a time over a `PeerConnection` per broker address (this
broker included: its own markers go through its own listener, like anyone's).
Each answer, or the error that replaced it, is handed back to the control thread
through `call_soon`; retrying is the coordinator's business.
"""

from __future__ import annotations

import logging
import queue
import threading

from mmlog.system.queues import queue_items
from mmlog.protocol.messages import write_txn_markers
from mmlog.replication.peer import PeerConnection

log = logging.getLogger(__name__)

VERSION = 0


class MarkerSender(threading.Thread):
    """Sends WriteTxnMarkers requests in order; `done(response | exception)` runs on the control thread."""

    def __init__(self, client_id: str, call_soon, timeout_s: float = 30.0, security=None) -> None:
        super().__init__(name="txn-marker-sender", daemon=True)
        self.client_id = client_id
        self.call_soon = call_soon
        self.timeout_s = timeout_s
        self.security = security  # to the partition leaders' inter.broker.listener.name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._peers: dict[tuple[str, int], PeerConnection] = {}

    def send(self, address: tuple[str, int], markers: list[dict], done) -> None:
        self._queue.put((address, markers, done))

    def stop(self) -> None:
        self._queue.put(None)

    def run(self) -> None:
        for address, markers, done in queue_items(self._queue):
            try:
                peer = self._peers.get(address) or self._peers.setdefault(
                    address, PeerConnection(address, self.client_id, self.security))
                answer = peer.request(write_txn_markers.API_KEY, VERSION, write_txn_markers.REQUEST(markers=markers),
                                      self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - the coordinator retries whatever went wrong
                answer = exc
            self.call_soon(lambda done=done, answer=answer: done(answer))
        for peer in self._peers.values():
            peer.close()
