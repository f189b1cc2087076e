"""The cleaner process: which log to clean next, and the loop the supervisor forks (Kafka's LogCleanerManager).

Forked by the supervisor (`acceptor/supervisor.py`) when log.cleaner.enable is
true, replaced when it dies, stopped with SIGTERM. It opens the log manager
attached (as processors and the replica fetcher do: no recovery, no catalogue
writes) and loops:

    every log.cleaner.backoff.ms, or at once after a cleaning:
      reload the catalogue; for each hosted partition of a topic whose cleanup.policy
      has compact: dirty ratio = dirty bytes / cleanable bytes (`Cleaner.dirty_bytes`);
      clean the log that is due (ratio >= min.cleanable.dirty.ratio, or a dirty record
      older than max.compaction.lag.ms) with the highest ratio;
      write cleaner-status.json (every compacted log's ratio and last cleaning); the
      broker's totals go to its metrics block through `on_clean`.

A cleaning that fails (a segment that does not parse, a failing disk) is logged and
the partition is left alone until the process restarts; its cleaned files are
leftovers that the next swap or recovery removes.

A full disk (ENOSPC, EDQUOT) is not such a failure: space comes back (retention, an
operator), so the cleaner waits a backoff and tries again, the same partition
included, and says so once when the disk fills and once when it has room again,
not at every try. A cleaning that met it removes its half-written cleaned files at
once (cleaner.py), so the cleaner never holds space the producers are short of. The
status file is rewritten only when its content changes: a cleaner with nothing to
compact writes nothing after its first pass, and on a full disk it does not even
need that one.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from dataclasses import asdict
from pathlib import Path

from mmlog.errors import KafkaError
from mmlog.log.cleaner.cleaner import STATUS_FILE, Cleaner, Throttler, now_ms
from mmlog.log.cleaner.partition_files import first_dirty_offset, segment_max_timestamp
from mmlog.system.files import atomic_write
from mmlog.log.log_dirs import is_disk_full
from mmlog.log.manager import LogManager
from mmlog.log.cleaner.offset_map import OffsetMap
from mmlog.system.process import name_process

log = logging.getLogger(__name__)

PROCESS_NAME = "mmlog-cleaner"  # its /proc/<pid>/comm: tools and tests tell it from the processors by it


class LogCleanerManager:
    """Chooses the dirtiest log and cleans it; keeps the status others read."""

    def __init__(self, config, manager: LogManager | None = None, on_clean=None) -> None:
        self.config = config
        self.on_clean = on_clean  # called with each cleaning's CleanStats (the broker's metrics counters)
        self.manager = manager or LogManager(config.log_dirs, config.log_config(), owner=False,
                                             broker_id=config["broker.id"])
        self.cleaner = Cleaner(OffsetMap(config["log.cleaner.dedupe.buffer.size"],
                                         config["log.cleaner.io.buffer.load.factor"]),
                               Throttler(config["log.cleaner.io.max.bytes.per.second"]))
        self.status: dict[str, dict] = {}
        self.failed: set[tuple[str, int]] = set()
        self.stopped = threading.Event()
        self.disk_full: OSError | None = None  # the ENOSPC the cleaner is waiting out, logged once
        self._wrote = False  # whether this pass wrote anything (a pass that wrote nothing proves no room)
        self._status_written = read_status_bytes(config.log_dirs[0])  # what the status file holds now

    def compacted(self) -> list[tuple[str, int]]:
        topics = self.manager.topics()
        return [(t, p) for t, p in self.manager.hosted()
                if t in topics and self.manager.config_for(t).compact and (t, p) not in self.failed]

    def survey(self, now: int) -> list[tuple[float, str, int, int]]:
        """(ratio, topic, partition, first dirty) of every compacted log due for cleaning, dirtiest first."""
        due = []
        for topic, number in self.compacted():
            try:
                part = self.manager.partition(topic, number)
            except KafkaError:
                continue
            first_dirty = first_dirty_offset(part.directory)
            dirty, total = Cleaner.dirty_bytes(part, first_dirty, now)
            ratio = dirty / total if total else 0.0
            entry = self.status.setdefault(f"{topic}-{number}", {})
            entry.update(dirty_ratio=round(ratio, 4), first_dirty_offset=first_dirty, cleanable_bytes=total)
            config = part.config
            overdue = dirty and self._oldest_dirty_age(part, first_dirty, now) > config.max_compaction_lag_ms
            if dirty and (ratio >= config.min_cleanable_dirty_ratio or overdue):
                due.append((ratio, topic, number, first_dirty))
        return sorted(due, reverse=True)

    @staticmethod
    def _oldest_dirty_age(part, first_dirty: int, now: int) -> int:
        cleanable, nxt = Cleaner.cleanable_segments(part, now)
        for base in cleanable:
            if nxt[base] > first_dirty:
                return now - segment_max_timestamp(part, base)
        return 0

    def clean_once(self, now: int | None = None) -> bool:
        """Clean the dirtiest due log; False if none was due."""
        now = now_ms() if now is None else now
        self.manager.reload()
        due = self.survey(now)
        if not due:
            self.write_status()
            return False
        _, topic, number, first_dirty = due[0]
        part = self.manager.partition(topic, number)
        try:
            stats = self.cleaner.clean(part, first_dirty, now)
        except (OSError, ValueError, KafkaError) as exc:
            if is_disk_full(exc):
                raise  # run() waits; the partition is tried again, not left alone
            log.error("cleaning %s-%d failed, leaving it alone until a restart: %s", topic, number, exc)
            self.failed.add((topic, number))
            return True
        if stats is not None:
            self._wrote = True
            mb = stats.bytes_read / 1e6
            log.info("cleaned %s-%d: offsets [%d, %d), %.1f MB read, %.1f MB written, %d of %d records kept, "
                     "%.1f MB/s", topic, number, stats.first_dirty, stats.end_offset, mb, stats.bytes_written / 1e6,
                     stats.records_kept, stats.records_read, mb / max(stats.elapsed_s, 1e-9))
            entry = self.status.setdefault(f"{topic}-{number}", {})
            entry.update(last_run_ms=now_ms(), last_run=asdict(stats), first_dirty_offset=stats.end_offset,
                         dirty_ratio=0.0)
            if self.on_clean is not None:
                self.on_clean(stats)
        self.write_status()
        return stats is not None

    def write_status(self) -> None:
        """Rewrite the status file if what it says changed (each rewrite needs a block: see the docstring)."""
        data = json.dumps(self.status, sort_keys=True).encode()
        if data != self._status_written:
            atomic_write(self.config.log_dirs[0] / STATUS_FILE, data)
            self._status_written = data
            self._wrote = True

    def run(self) -> int:
        backoff = self.config["log.cleaner.backoff.ms"] / 1000
        while not self.stopped.is_set():
            self._wrote = False
            try:
                busy = self.clean_once()
            except KafkaError as exc:  # a topic deleted under us, a partition not ours any more
                log.info("cleaner: %s", exc)
                busy = False
            except OSError as exc:
                if not is_disk_full(exc):
                    raise  # a failing disk: the supervisor restarts us after probing the log dirs
                if self.disk_full is None:
                    log.warning("log cleaner: a log dir is full (%s); waiting, and trying again every %.1f s",
                                exc, backoff)
                self.disk_full = exc
                busy = False
            else:
                if self.disk_full is not None and self._wrote:
                    log.info("log cleaner: room on disk again; cleaning goes on")
                    self.disk_full = None
            if not busy:
                self.stopped.wait(backoff)
        self.manager.close(clean=False)
        return 0


def read_status_bytes(log_dir: Path) -> bytes | None:
    """The status file's bytes as they are (None if there is none)."""
    try:
        return (Path(log_dir) / STATUS_FILE).read_bytes()
    except OSError:
        return None


def read_status(log_dir: Path) -> dict[str, dict]:
    """What the cleaner last wrote (empty if it never ran)."""
    try:
        return json.loads((Path(log_dir) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}


def cleaner_main(config, on_clean=None) -> int:
    """The cleaner process's body (after fork): run until SIGTERM. on_clean(stats) after each cleaning."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the main process decides
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    name_process(PROCESS_NAME)
    manager = LogCleanerManager(config, on_clean=on_clean)
    signal.signal(signal.SIGTERM, lambda *_: manager.stopped.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD})
    log.debug("log cleaner ready (pid %d)", os.getpid())
    return manager.run()
