"""Server-side console sessions: a random id in an HttpOnly, SameSite=Strict cookie, the user's password kept
here only (the session's Kafka clients log in with it), a CSRF token for the state-changing requests.

A session ends on logout, after `console.session.timeout.ms` without a request, or when MAX_SESSIONS are
open and a newer one needs the room (the least recently used goes); its Kafka clients are closed then.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time

from mmlog.console.clients import Clients

COOKIE = "mmlog-console"
CSRF_HEADER = "X-Csrf-Token"
MAX_SESSIONS = 64  # each holds up to three Kafka clients and their connections


class Session:
    """One browser's login: who (None: anonymous), the secret its clients use, its CSRF token."""

    def __init__(self, user: str | None, clients: Clients) -> None:
        self.id = secrets.token_urlsafe(32)
        self.csrf = secrets.token_urlsafe(32)
        self.user = user
        self.clients = clients
        self.seen = time.monotonic()
        self.lock = threading.RLock()  # one request at a time uses its clients (they are not thread-safe)

    @property
    def principal(self) -> str:
        return f"User:{self.user}" if self.user else "User:ANONYMOUS"

    def admin(self):
        return self.clients.admin()

    def consumer(self):
        return self.clients.consumer()

    def producer(self):
        return self.clients.producer()

    def registry(self):
        return self.clients.registry()

    def csrf_ok(self, token: str | None) -> bool:
        """Whether a request carries this session's token (compared in constant time)."""
        return bool(token) and hmac.compare_digest(token.encode(), self.csrf.encode())

    def public(self) -> dict:
        """What the browser may know of its session: never the password, never the session id."""
        return {"user": self.user, "principal": self.principal, "csrf": self.csrf}


class Sessions:
    """The open sessions by id (thread-safe: handlers run on the executor's threads)."""

    def __init__(self, make_clients, timeout_s: float, limit: int = MAX_SESSIONS) -> None:
        self.make_clients = make_clients  # (user, password) -> Clients
        self.timeout_s = timeout_s
        self.limit = limit
        self._open: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, user: str | None, password: str | None) -> Session:
        session = Session(user, self.make_clients(user, password))
        with self._lock:
            ended = self._expired()
            while len(self._open) >= self.limit:
                oldest = min(self._open.values(), key=lambda s: s.seen)
                ended.append(self._open.pop(oldest.id))
            self._open[session.id] = session
        _close(ended)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The session of that id, still open (its idle time starts again), or None."""
        with self._lock:
            ended = self._expired()
            session = self._open.get(session_id or "")
            if session is not None:
                session.seen = time.monotonic()
        _close(ended)
        return session

    def end(self, session_id: str) -> None:
        with self._lock:
            session = self._open.pop(session_id, None)
        _close([session] if session else [])

    def close(self) -> None:
        with self._lock:
            ended, self._open = list(self._open.values()), {}
        _close(ended)

    def __len__(self) -> int:
        return len(self._open)

    def _expired(self) -> list[Session]:
        now = time.monotonic()
        gone = [s for s in self._open.values() if now - s.seen > self.timeout_s]
        for session in gone:
            del self._open[session.id]
        return gone


def _close(sessions) -> None:
    for session in sessions:
        with session.lock:  # after the request using its clients, if one is
            session.clients.close()
