"""A JSON file the main process replaces and processors re-read: the shape of every security store here.

The SCRAM credentials (credentials.py) and the ACLs (acls.py) are each one file in the
first data directory, mode 0600. The main process (or an offline tool) writes it whole
and atomically: temporary file, fsync, rename, directory fsync; a crash leaves the old
file or the new one, never a torn one. A process reading it keeps its parsed copy and
re-reads only when the file's (inode, mtime, size) stamp changed: one `stat` per check.
A file that does not parse (edited by hand) is logged and the previous contents kept:
for the ACLs, the empty set at start, which allows super users only.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from mmlog.system.files import atomic_write, file_stamp

log = logging.getLogger("mmlog.security")


def load_json(path) -> dict | None:
    """The file's document; None when there is no file."""
    try:
        return json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return None


def save_json(path, doc: dict) -> None:
    """Replace the file durably, readable by its owner only; one temporary name per process, as the broker
    and the CLI (`mmlog users --data-dir`) may both write it."""
    path = Path(path)
    atomic_write(path, json.dumps(doc, sort_keys=True).encode(), mode=0o600,
                 tmp=path.with_name(f".{path.name}.{os.getpid()}.tmp"))


class WatchedFile:
    """A process's parsed view of a store file, re-parsed (by `parse(doc or None)`) when it changed."""

    def __init__(self, path, parse) -> None:
        self.path = Path(path)
        self._parse = parse
        self._stamp = ()  # never a real stamp: the first check reads
        self.value = parse(None)
        self.generation = 0  # bumped on every re-read: caches of decisions made from `value` compare it

    def check(self):
        """The current value, re-read if the file changed since the last check."""
        stamp = file_stamp(self.path)
        if stamp != self._stamp:
            try:
                self.value = self._parse(load_json(self.path))
                self._stamp = stamp
                self.generation += 1
            except OSError:
                pass  # replaced meanwhile: the next check reads the newer one
            except (ValueError, KeyError, TypeError) as exc:  # edited by hand and broken: keep what we had
                self._stamp = stamp
                log.error("%s does not parse (%s): still using its previous contents", self.path, exc)
        return self.value
