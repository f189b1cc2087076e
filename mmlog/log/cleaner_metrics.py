"""The log cleaner's figures for a metrics surface: a small JSON file the cleaner process rewrites and
any process reads (`read`), with no lock and no message between processes.

`cleaner-metrics.json` in the first log dir, written atomically (rename) by the cleaner
process after every look at the logs (`cleaner_manager.py`), so a reader sees one whole
version or the previous one:

    {"passes": 12, "bytes_read": 123456, "bytes_written": 23456, "records_read": 4000,
     "records_kept": 900, "last_pass_ms": 1795716000000, "last_pass_seconds": 0.08,
     "max_dirty_ratio": 0.42, "updated_ms": 1795716000100}

passes, bytes_* and records_* are counters since the broker's data dir first had a
cleaner (a replaced cleaner process goes on from the file's figures, so they only
grow); last_pass_* describe the newest cleaning (0 before the first); max_dirty_ratio
is the dirtiest compacted log's ratio at the last look (Kafka's
max-dirty-percent / 100), updated_ms when the file was written. A metrics endpoint
reads it on each scrape with `read(log_dir)`; a missing or damaged file reads as zeros.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from mmlog.log.files import atomic_write

METRICS_FILE = "cleaner-metrics.json"


@dataclass
class CleanerMetrics:
    """The cleaner's counters and gauges (see the module docstring)."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    last_pass_ms: int = 0
    last_pass_seconds: float = 0.0
    max_dirty_ratio: float = 0.0
    updated_ms: int = 0

    def add_pass(self, stats, now_ms: int) -> None:
        """Count one cleaning (cleaner.CleanStats)."""
        self.passes += 1
        self.bytes_read += stats.bytes_read
        self.bytes_written += stats.bytes_written
        self.records_read += stats.records_read
        self.records_kept += stats.records_kept
        self.last_pass_ms = now_ms
        self.last_pass_seconds = round(stats.elapsed_s, 6)


def read(log_dir: Path) -> CleanerMetrics:
    """The figures the cleaner last wrote in this (first) log dir; zeros if none."""
    try:
        data = json.loads((Path(log_dir) / METRICS_FILE).read_text())
    except (OSError, ValueError):
        return CleanerMetrics()
    if not isinstance(data, dict):
        return CleanerMetrics()
    known = {f.name: f.type for f in fields(CleanerMetrics)}
    try:
        return CleanerMetrics(**{k: (float(v) if known[k] == "float" else int(v))
                                 for k, v in data.items() if k in known})
    except (TypeError, ValueError):
        return CleanerMetrics()


def write(log_dir: Path, metrics: CleanerMetrics) -> None:
    atomic_write(Path(log_dir) / METRICS_FILE, json.dumps(asdict(metrics), sort_keys=True).encode(), sync=False)
