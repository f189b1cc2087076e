"""The topic worker: the thread that makes partitions (auto-creation, CreateTopics, CreatePartitions).

A creation waits on the file system (a partition's files can take hundreds of milliseconds when the
disk is busy; 10,000 partitions tens of seconds), and the control thread goes on answering heartbeats
meanwhile. Jobs run in order; each answers its own failures (control.py's `_replying`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from mmlog.system.queues import queue_items

log = logging.getLogger(__name__)


class TopicWorker:
    """Runs jobs in order on a thread of its own."""

    def __init__(self, wanted: threading.Event) -> None:
        self.wanted = wanted  # set while the control thread has work waiting for the topic lock
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self._run, name="topic-worker", daemon=True)
        self._thread.start()
        return self._thread

    def submit(self, job) -> None:
        if self._thread is None:
            self.start()
        self._jobs.put(job)

    def stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(5)

    def let_control_go_first(self) -> None:
        """Call before taking the topic lock: a lock is not fair, and taken again at once it would
        starve the control thread's queued work."""
        for _ in range(1000):  # a second at most, should the control thread be stuck elsewhere
            if not self.wanted.is_set():
                return
            time.sleep(0.001)

    def _run(self) -> None:
        for job in queue_items(self._jobs):
            try:
                job()
            except Exception:  # noqa: BLE001 - a job answers its own failures; this is a bug's last net
                log.exception("topic worker job failed")
