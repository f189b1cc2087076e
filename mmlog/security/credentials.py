"""The SCRAM credential store as a file: what processors read to authenticate, what admins write.

`credentials.json` in the first data directory (mode 0600) holds, per user and
mechanism, Kafka's credential string (`scram.ScramCredential.to_kafka`), never a
password:

    {"users": {"alice": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=4096"}}}

Standalone it *is* the store: AlterUserScramCredentials (through the control plane)
and `mmlog users --data-dir` write it. In cluster mode ZooKeeper's
/config/users/<name> is the store and the main process mirrors it here on every
change, so processors never talk to ZooKeeper. Writes replace the file atomically
(store_file.py); readers re-read it when its stat changes (one `stat` per
authentication, nothing per request).
"""

from __future__ import annotations

from pathlib import Path

from mmlog.security import scram
from mmlog.security.store_file import WatchedFile, load_json, save_json

FILE_NAME = "credentials.json"


def path_in(directory) -> Path:
    return Path(directory) / FILE_NAME


def load(path) -> dict[str, dict[str, str]]:
    """user -> {mechanism: credential string}; empty when there is no file."""
    return _users(load_json(path))


def save(path, users: dict[str, dict[str, str]]) -> None:
    save_json(path, {"users": users})


def _users(doc: dict | None) -> dict[str, dict[str, str]]:
    return (doc or {}).get("users", {})


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
    """A process's view of the store file, re-read when it changed (store_file.WatchedFile)."""

    def __init__(self, path) -> None:
        self._file = WatchedFile(path, _users)

    @property
    def path(self) -> Path:
        return self._file.path

    def current(self) -> dict[str, dict[str, str]]:
        return self._file.check()

    def scram(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        text = self.current().get(user, {}).get(mechanism)
        return None if text is None else scram.ScramCredential.from_kafka(text)
