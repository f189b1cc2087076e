"""A connection's SASL state on a SASL_PLAINTEXT or SASL_SSL listener, and the gate before dispatch.

States (Kafka's SaslServerAuthenticator, reduced to what a processor needs):

    HANDSHAKE ---SaslHandshake(enabled mechanism)---> AUTHENTICATE ---last token ok---> COMPLETE
        |                                                  |                               |
        |  any API but ApiVersions / SaslHandshake         |  bad credentials: the answer  |  SaslHandshake again
        +--> connection closed (ILLEGAL_SASL_STATE)        |  SASL_AUTHENTICATION_FAILED   |  (re-authentication,
                                                           |  is held back by              |  same mechanism and
                                                           |  connection.failed.           |  principal) -> AUTHENTICATE
                                                           |  authentication.delay.ms,     |
                                                           v  then the connection closes   v  session past its
                                                                                              lifetime: closed

After SaslHandshake v1 the tokens come in SaslAuthenticate requests; after v0 (the
legacy flow) each token is a bare size-prefixed frame with no request header and
is answered the same way. With `connections.max.reauth.ms` > 0 a session lasts that
long (told to the client in SaslAuthenticate v1+ as session_lifetime_ms); a request
on an expired session other than a re-authentication closes the connection, and
so does the idle reaper. The principal, `User:<name>`, stays on the connection for
authorisation and per-user quotas.
"""

from __future__ import annotations

import logging
import time

from mmlog.processors.log_cap import LogCap
from mmlog.protocol import API_VERSIONS
from mmlog.security import sasl

log = logging.getLogger("mmlog.security")

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANDSHAKE, AUTHENTICATE, COMPLETE = "handshake", "authenticate", "complete"
ALLOWED_BEFORE = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


class SaslSession:
    """One connection's authentication: state, mechanism, principal and expiry."""

    __slots__ = ("state", "mechanism", "server", "legacy", "principal", "expires_at", "reauthenticating")

    def __init__(self) -> None:
        self.state = HANDSHAKE
        self.mechanism: str | None = None
        self.server = None
        self.legacy = False  # SaslHandshake v0: raw tokens follow
        self.principal: str | None = None
        self.expires_at: float | None = None  # monotonic; None: never
        self.reauthenticating = False

    def open(self) -> bool:
        """Requests may pass to dispatch: authenticated and within the session's lifetime."""
        return self.state is COMPLETE and (self.expires_at is None or time.monotonic() < self.expires_at)

    def expired(self) -> bool:
        return self.state is COMPLETE and self.expires_at is not None and time.monotonic() >= self.expires_at

    def begin(self, mechanism: str, credentials, legacy: bool) -> None:
        self.reauthenticating = self.state is COMPLETE
        self.state = AUTHENTICATE
        self.mechanism = mechanism
        self.legacy = legacy
        self.server = sasl.server(mechanism, credentials)

    def step(self, token: bytes, reauth_ms: int) -> bytes:
        """The answer to one token; AuthenticationFailed ends the session."""
        if self.state is not AUTHENTICATE:
            raise sasl.AuthenticationFailed(f"SASL token in state {self.state}")
        answer = self.server.step(token)
        if self.server.done:
            principal = f"User:{self.server.username}"
            if self.reauthenticating and principal != self.principal:
                raise sasl.AuthenticationFailed(f"re-authentication as {principal}, not {self.principal}")
            self.principal = principal
            self.state = COMPLETE
            self.server = None
            self.expires_at = time.monotonic() + reauth_ms / 1000 if reauth_ms else None
        return answer

    def lifetime_ms(self) -> int:
        """What is left of the session, for SaslAuthenticate v1+ (0: no limit)."""
        if self.expires_at is None:
            return 0
        return max(1, int((self.expires_at - time.monotonic()) * 1000))


FAILURE_LOG_PER_S = 10  # warnings a second per processor; past it they are counted and summed up later
_failures = LogCap(log, FAILURE_LOG_PER_S, "failed authentications")


def log_failure(conn, mechanism: str | None, reason: str) -> None:
    """One warning per failed authentication, with the peer (passwords are never in `reason`), at most
    FAILURE_LOG_PER_S a second: a password-guessing storm must not flood the journal."""
    peer = conn.peer[0] if isinstance(conn.peer, tuple) else conn.peer
    _failures(logging.WARNING, "failed authentication from %s on listener %s (%s): %s", peer, conn.listener_name,
              mechanism, reason)
