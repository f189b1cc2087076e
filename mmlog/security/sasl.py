"""SASL mechanism servers (PLAIN, SCRAM-SHA-256/512) and the client side's first steps, sans-IO.

A server takes the client's tokens one at a time (`step`) and answers each; it
raises `AuthenticationFailed` on bad credentials or a malformed token, and sets
`done` and `username` once the client is authenticated. PLAIN (RFC 4616,
`[authzid] NUL user NUL password`) is checked against the user's SCRAM credential
(the password is salted with the stored salt and compared), so one store serves
every mechanism and no password is kept anywhere.
"""

from __future__ import annotations

import re

from mmlog.security import scram

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class AuthenticationFailed(Exception):
    """Bad credentials or a malformed exchange. The message names the user, never the password."""


class PlainServer:
    def __init__(self, credentials) -> None:
        self.credentials = credentials  # a CredentialReader
        self.username: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        parts = bytes(token).split(b"\0")
        if len(parts) != 3 or self.done:
            raise AuthenticationFailed("malformed PLAIN token")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed(f"PLAIN: authorization id {authzid!r} is not the user {user!r}")
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            cred = self.credentials.scram(user, mechanism)
            if cred is not None:
                if not scram.check_password(mechanism, cred, password):
                    break
                self.username, self.done = user, True
                return b""
        raise AuthenticationFailed(f"invalid credentials for user {user!r}")


class ScramServer:
    def __init__(self, mechanism: str, credentials) -> None:
        self._server = scram.ScramServer(mechanism, lambda user: credentials.scram(user, mechanism))

    @property
    def username(self) -> str | None:
        return self._server.username

    @property
    def done(self) -> bool:
        return self._server.done

    def step(self, token: bytes) -> bytes:
        try:
            return self._server.step(bytes(token))
        except scram.ScramError as exc:
            raise AuthenticationFailed(str(exc)) from exc


def server(mechanism: str, credentials):
    return PlainServer(credentials) if mechanism == "PLAIN" else ScramServer(mechanism, credentials)


def client_tokens(mechanism: str, username: str, password: str):
    """A generator for a client: yields each token to send, is sent each server answer (None first)."""
    if mechanism == "PLAIN":
        yield b"\0" + username.encode() + b"\0" + password.encode()
        return
    client = scram.ScramClient(mechanism, username, password)
    server_first = yield client.first()
    server_final = yield client.final(server_first)
    try:
        client.verify(server_final)
    except scram.ScramError as exc:
        raise AuthenticationFailed(str(exc)) from exc


def parse_jaas(text: str) -> tuple[str, str]:
    """(username, password) of a JAAS line: `...LoginModule required username="u" password="p";`."""
    found = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', text))
    if "username" not in found or "password" not in found:
        raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
    return found["username"], found["password"]
