"""What a Prometheus scrape reads and how it is taken: `MetricsSources` and `Scraper`.

The endpoint (`GET /metrics`, off unless `metrics.listen` is set; a bare port listens on 127.0.0.1 only)
is served by the broker's HTTP server (`mmlog/web/metrics.py`), which runs each scrape on one of its
executor threads, never on its loop. A scrape holds the topic lock (`acceptor/control.py`): it opens
partitions and reads the ZooKeeper states while no topic is being made or changed, and the supervisor
never forks in the middle of it (its fork guard takes that lock). Holding it stalls no one who must not
wait: the control thread only ever tries the topic lock (`acquire(blocking=False)`) and queues its topic
work until it is free, answering group requests (heartbeats, commits) meanwhile; only the topic worker
waits for it, and making a topic may wait for a scrape.
"""

from __future__ import annotations

from mmlog.metrics.exposition import CONTENT_TYPE, render
from mmlog.metrics.families import collect

__all__ = ["CONTENT_TYPE", "MetricsSources", "Scraper"]


class MetricsSources:
    """What a scrape reads in the main process: the shared block, the wake board and the control plane."""

    def __init__(self, block, board, control) -> None:
        self.block = block
        self.board = board
        self.control = control

    @property
    def manager(self):
        return self.control.manager

    @property
    def coordinator(self):
        return self.control.coordinator

    def is_controller(self) -> bool:
        # A ZooKeeper store knows whether it won /controller; the embedded store is the whole cluster.
        return bool(self.control.store.is_controller)

    def offline_partitions(self) -> int:
        store = self.control.store
        states = store.states  # None: a broker alone, whose catalogue knows its offline partitions
        if states is not None:
            if not store.is_controller:
                return 0
            return sum(1 for t in states.topics() for s in states.of_topic(t) if s is not None and s.leader < 0)
        manager = self.manager
        return sum(1 for t, p in manager.hosted() if manager.is_offline(t, p))

    def isr_changes(self) -> tuple[int, int]:
        replicas = self.control.store.replicas
        return (replicas.isr_shrinks, replicas.isr_expands) if replicas is not None else (0, 0)


class Scraper:
    """One scrape's text, taken under the topic lock (call it on a thread that may wait: not a loop's)."""

    def __init__(self, sources: MetricsSources, lock) -> None:
        self.sources = sources
        self.lock = lock

    def __call__(self) -> bytes:
        with self.lock:
            return render(collect(self.sources))
