"""SCRAM against RFC 7677's SCRAM-SHA-256 example exchange, and the stored credential's format."""

from __future__ import annotations

import base64

import pytest

from mmlog.security import scram
from mmlog.security.sasl import AuthenticationFailed, PlainServer

CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def rfc_client() -> scram.ScramClient:
    client = scram.ScramClient("SCRAM-SHA-256", "user", "pencil")
    client._nonce, client._first_bare = CLIENT_NONCE, f"n=user,r={CLIENT_NONCE}"
    return client


def test_the_client_side_reproduces_rfc_7677():
    client = rfc_client()
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(SERVER_FIRST.encode()) == CLIENT_FINAL.encode()
    client.verify(SERVER_FINAL.encode())


def test_the_server_side_reproduces_rfc_7677():
    cred = scram.credential("SCRAM-SHA-256", "pencil", 4096, SALT)
    server = scram.ScramServer("SCRAM-SHA-256", {"user": cred}.get)
    server.step(b"n,,n=user,r=" + CLIENT_NONCE.encode())
    server._nonce, server._server_first = SERVER_FIRST.split(",")[0][2:], SERVER_FIRST  # the RFC's server nonce
    assert server.step(CLIENT_FINAL.encode()) == SERVER_FINAL.encode()
    assert server.done and server.username == "user"


def test_a_wrong_proof_and_extensions_are_refused():
    cred = scram.credential("SCRAM-SHA-256", "other", 4096, SALT)
    server = scram.ScramServer("SCRAM-SHA-256", {"user": cred}.get)
    server.step(b"n,,n=user,r=" + CLIENT_NONCE.encode())
    server._nonce, server._server_first = SERVER_FIRST.split(",")[0][2:], SERVER_FIRST
    with pytest.raises(scram.ScramError):
        server.step(CLIENT_FINAL.encode())
    with pytest.raises(scram.ScramError):  # Kafka's tokenauth extension: no delegation tokens here
        scram.ScramServer("SCRAM-SHA-256", {"user": cred}.get).step(b"n,,n=user,r=abc,tokenauth=true")


def test_the_stored_form_is_kafkas_and_holds_no_password():
    cred = scram.credential("SCRAM-SHA-512", "pencil", 4096, SALT)
    text = cred.to_kafka()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=") and text.endswith(",iterations=4096")
    assert scram.ScramCredential.from_kafka(text) == cred
    assert scram.check_password("SCRAM-SHA-512", cred, "pencil")
    assert not scram.check_password("SCRAM-SHA-512", cred, "pencil!")


class _Store:
    def __init__(self, **users):
        self.users = {name: scram.credential("SCRAM-SHA-512", pw) for name, pw in users.items()}

    def scram(self, user, mechanism):
        return self.users.get(user) if mechanism == "SCRAM-SHA-512" else None


def test_plain_checks_the_password_against_the_scram_credential():
    assert PlainServer(_Store(alice="pw")).step(b"\0alice\0pw") == b""
    for token in (b"\0alice\0nope", b"\0bob\0pw", b"alice\0pw", b"mallory\0alice\0pw"):
        with pytest.raises(AuthenticationFailed):
            PlainServer(_Store(alice="pw")).step(token)
