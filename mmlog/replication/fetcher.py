"""The replica fetcher process: one `SourceFetcher` thread per leader broker in the fetch plan.

Forked by the supervisor in cluster mode and replaced if it dies (like a
processor). It opens the log manager attached, as processors do, and appends
through the partition lock, so nothing it does needs the main process: a
follower's log end reaches the leader as the next fetch's offset, its HW comes
in each answer. Its loop only watches the plan (`fetch_plan.py`) and SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from mmlog.system.process import name_process
from mmlog.log.manager import LogManager
from mmlog.log.open_partitions import open_partition_budget
from mmlog.replication.fetch_plan import PlanReader
from mmlog.replication.source import SourceFetcher
from mmlog.replication.throttle import UNLIMITED, Throttle

log = logging.getLogger(__name__)

PLAN_POLL_S = 0.05
PROCESS_NAME = "mmlog-fetcher"  # its /proc/<pid>/comm: tools tell it from the processors by it


class ReplicaFetcher:
    """The source threads, kept in line with the plan."""

    def __init__(self, config) -> None:
        self.config = config
        self.me = config["broker.id"]
        self.manager = LogManager(config.log_dirs, config.log_config(), owner=False, broker_id=self.me,
                                  max_open=open_partition_budget(config["log.max.open.partitions"]))
        self.plan = PlanReader(config.log_dirs[0])
        self.sources: dict[int, SourceFetcher] = {}
        self.throttle = Throttle()  # shared by every source thread: the rate bounds the whole broker
        self.stopped = threading.Event()

    def run(self) -> int:
        """Follow the plan until SIGTERM (0); 1 as soon as a source thread has died, so that the
        supervisor replaces the process rather than leave that leader's partitions unfetched."""
        dead: list[int] = []
        while not self.stopped.wait(PLAN_POLL_S):
            dead = [leader for leader, source in self.sources.items() if not source.is_alive()]
            if dead:
                log.critical("the fetcher thread for broker %d died: the replica fetcher exits to be replaced", dead[0])
                self.stopped.set()
                break
            if self.plan.changed():
                self._follow_plan()
            else:
                self.manager.reload()  # one stat: altered topic configs (segment.bytes...) reach our appends
        for source in self.sources.values():
            source.stop()
        for source in self.sources.values():
            source.join(timeout=5)
        return 1 if dead else 0

    def _follow_plan(self) -> None:
        self.manager.reload()
        wanted = self.plan.sources
        rate, throttled = self.plan.throttle
        self.throttle.update(UNLIMITED if rate is None else rate, throttled)
        for leader_id in [b for b in self.sources if b not in wanted]:
            self.sources.pop(leader_id).stop()
        for leader_id, source in wanted.items():
            fetcher = self.sources.get(leader_id)
            if fetcher is None:
                fetcher = self.sources[leader_id] = SourceFetcher(self.me, leader_id, self.manager, self.config,
                                                                        self.throttle)
                fetcher.update(source.address, source.partitions)
                fetcher.start()
            else:
                fetcher.update(source.address, source.partitions)
        log.debug("following %d partitions on brokers %s", sum(len(s.partitions) for s in wanted.values()),
                  sorted(wanted))


def fetcher_main(config) -> int:
    """The fetcher process's body (after fork): run until SIGTERM."""
    name_process(PROCESS_NAME)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the main process decides
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    fetcher = ReplicaFetcher(config)
    signal.signal(signal.SIGTERM, lambda *_: fetcher.stopped.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD})
    log.debug("replica fetcher ready (pid %d)", os.getpid())
    return fetcher.run()
