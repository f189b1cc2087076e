"""The SCRAM credential store as a file: what processors read to authenticate, what admins write.

`credentials.json` in the first data directory (mode 0600) holds, per user and
mechanism, Kafka's credential string (`scram.ScramCredential.to_kafka`), never a
password:

    {"users": {"alice": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=4096"}}}

Standalone it *is* the store: AlterUserScramCredentials (through the control plane)
and `mmlog users --data-dir` write it. In cluster mode ZooKeeper's
/config/users/<name> is the store and the main process mirrors it here on every
change, so processors never talk to ZooKeeper. Writes replace the file atomically
(temporary file, fsync, rename); readers re-read it when its stat changes (one
`stat` per authentication, nothing per request).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mmlog.security import scram

FILE_NAME = "credentials.json"


def path_in(directory) -> Path:
    return Path(directory) / FILE_NAME


def load(path) -> dict[str, dict[str, str]]:
    """user -> {mechanism: credential string}; empty when there is no file."""
    try:
        return json.loads(Path(path).read_bytes()).get("users", {})
    except FileNotFoundError:
        return {}


def save(path, users: dict[str, dict[str, str]]) -> None:
    """Replace the file durably, readable by its owner only (log.files.atomic_write's protocol with a
    mode: that module sits above this layer)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps({"users": users}, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)  # the rename itself is durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def upsert(users: dict, name: str, mechanism: str, cred: scram.ScramCredential) -> None:
    users.setdefault(name, {})[mechanism] = cred.to_kafka()


def delete(users: dict, name: str, mechanism: str) -> bool:
    """Remove one mechanism's credential; False if there was none."""
    mechs = users.get(name)
    if not mechs or mechanism not in mechs:
        return False
    del mechs[mechanism]
    if not mechs:
        del users[name]
    return True


class CredentialReader:
    """A process's view of the store file, re-read when it changed."""

    def __init__(self, path) -> None:
        self.path = Path(path)
        self._stamp = None
        self.users: dict[str, dict[str, str]] = {}

    def current(self) -> dict[str, dict[str, str]]:
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            try:
                self.users = load(self.path)
                self._stamp = stamp
            except (OSError, ValueError):
                pass  # replaced meanwhile: the next call reads the newer one
        return self.users

    def scram(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        text = self.current().get(user, {}).get(mechanism)
        return None if text is None else scram.ScramCredential.from_kafka(text)
