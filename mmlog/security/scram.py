"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka speaks them, sans-IO.

What is stored for a user and mechanism is never the password, only what RFC 5802
derives from it (`ScramCredential`):

    SaltedPassword = PBKDF2-HMAC(H, password, salt, iterations)
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

written as Kafka writes it in ZooKeeper's /config/users/<name>:
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.

The exchange (two round trips, each a SaslAuthenticate request):

    client-first  n,,n=<user>,r=<cnonce>[,<extensions>]
    server-first  r=<cnonce><snonce>,s=<b64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<b64 ClientProof>
    server-final  v=<b64 ServerSignature>           (or e=<error>)

AuthMessage = client-first-bare "," server-first "," client-final-without-proof;
ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage): the server recovers
ClientKey and checks H(ClientKey) == StoredKey; it proves itself with
HMAC(ServerKey, AuthMessage). Kafka's extensions (`tokenauth=true`, for delegation
tokens) are refused: mmlog has no delegation tokens. Channel binding is never used.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism bounds
MAX_ITERATIONS = 16384
GS2_HEADER = "n,,"


class ScramError(ValueError):
    """A SCRAM message that does not parse, or a proof that does not verify."""


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> "ScramCredential":
        fields = dict(item.split("=", 1) for item in text.split(","))
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ScramError(f"bad SCRAM credential: {exc}") from exc


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored form of a salted password (what AlterUserScramCredentials carries)."""
    h = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), hmac.digest(salted, b"Server Key", h),
                           iterations)


def credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
               salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def check_password(mechanism: str, cred: ScramCredential, password: str) -> bool:
    """Whether password is the one cred was made from (PLAIN checks against SCRAM credentials)."""
    made = from_salted(mechanism, salted_password(mechanism, password, cred.salt, cred.iterations), cred.salt,
                       cred.iterations)
    return hmac.compare_digest(made.stored_key, cred.stored_key)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for item in message.split(","):
        key, eq, value = item.partition("=")
        if not eq or len(key) != 1:
            raise ScramError(f"bad SCRAM attribute {item!r}")
        out[key] = value
    return out


def _username(raw: str) -> str:
    """RFC 5802 saslname: ',' and '=' are sent as =2C and =3D."""
    return raw.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The broker's side of one exchange. `lookup(user)` gives the user's credential or None."""

    def __init__(self, mechanism: str, lookup) -> None:
        self.mechanism = mechanism
        self.hash = MECHANISMS[mechanism]
        self.lookup = lookup
        self.username: str | None = None
        self.done = False
        self._cred: ScramCredential | None = None
        self._first_bare = self._server_first = self._nonce = ""

    def step(self, token: bytes) -> bytes:
        """The answer to the client's next message; ScramError when authentication fails."""
        try:
            text = token.decode()
        except UnicodeDecodeError as exc:
            raise ScramError("SCRAM message is not UTF-8") from exc
        return self._final(text) if self._cred is not None else self._first(text)

    def _first(self, text: str) -> bytes:
        if not text.startswith(GS2_HEADER):
            raise ScramError("SCRAM: only the gs2 header 'n,,' is accepted (no channel binding, no authzid)")
        self._first_bare = text[len(GS2_HEADER):]
        attrs = _attributes(self._first_bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("SCRAM client-first lacks n= or r=")
        extensions = set(attrs) - {"n", "r"}
        if extensions:
            raise ScramError(f"SCRAM extensions not supported: {', '.join(sorted(extensions))}")
        self.username = _username(attrs["n"])
        cred = self.lookup(self.username)
        if cred is None:
            raise ScramError(f"no {self.mechanism} credential for user {self.username!r}")
        self._cred = cred
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        if self.done:
            raise ScramError("SCRAM exchange already complete")
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final lacks p=")
        attrs = _attributes(without_proof)
        # Ends with, not equals: librdkafka 2.0 (Debian's kcat) sends the client nonce twice, and Kafka
        # brokers accepted that with the same test for years. The proof still covers the nonce as sent.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("SCRAM nonce mismatch")
        if attrs.get("c") != base64.b64encode(GS2_HEADER.encode()).decode():
            raise ScramError("SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError as exc:
            raise ScramError("SCRAM proof is not base64") from exc
        auth = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        cred = self._cred
        signature = hmac.digest(cred.stored_key, auth, self.hash)
        if len(proof) != len(signature):
            raise ScramError("SCRAM proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise ScramError(f"invalid credentials for user {self.username!r}")
        self.done = True
        return f"v={base64.b64encode(hmac.digest(cred.server_key, auth, self.hash)).decode()}".encode()


class ScramClient:
    """A client's side (mmlog's clients and the broker's own inter-broker connections)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.hash = MECHANISMS[mechanism]
        self.password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = base64.b64encode(os.urandom(18)).decode()
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (GS2_HEADER + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        if not attrs.get("r", "").startswith(self._nonce) or "s" not in attrs or "i" not in attrs:
            raise ScramError(f"bad SCRAM server-first {text!r}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c={base64.b64encode(GS2_HEADER.encode()).decode()},r={attrs['r']}"
        auth = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        signature = hmac.digest(hashlib.new(self.hash, client_key).digest(), auth, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self.hash), auth, self.hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), self._server_signature):
            raise ScramError("the server's SCRAM signature does not verify")
