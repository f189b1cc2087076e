"""Who is calling, and may they: HTTP basic authentication against the broker's SASL users, ACL decisions.

Authentication is asked for whenever a Kafka listener requires SASL: a user is the same as on the Kafka
side (PLAIN or SCRAM, one credential store, security/credentials.py; the password is checked as SASL
PLAIN checks it), and the principal is `User:<name>`. Otherwise a caller that presented a client
certificate over HTTPS is its distinguished name (`User:CN=...`, as on an SSL listener), any other
`User:ANONYMOUS`, as on a PLAINTEXT listener. Authorisation is the broker's ACL authoriser
(security/authorizer.py) asked with that principal and the caller's address; with no authoriser
configured everything is allowed.
A broker that forwards a request names the caller in a header, believed only from a super user (the
broker's own certificate principal over HTTPS), so the writer decides for the caller, not the broker.
Refusals are the JSON errors Confluent Schema Registry answers: 401 (error_code 401) without valid
credentials, 403 (error_code 40301) for an operation the ACLs refuse.
"""

from __future__ import annotations

import base64
import binascii

from aiohttp import web

from mmlog.security import acls, credentials, sasl, tls
from mmlog.security.authorizer import Authorizer
from mmlog.web.responses import HttpError

ANONYMOUS = "User:ANONYMOUS"
ON_BEHALF = "X-Mmlog-On-Behalf-Of"  # the principal a broker forwards a request for; believed from super users only
REALM = 'Basic realm="mmlog"'


class Caller:
    """One request's principal and address, shaped as the authoriser's connection (its decision cache too)."""

    __slots__ = ("acl_cache", "peer", "principal")

    def __init__(self, principal: str, peer) -> None:
        self.principal = principal
        self.peer = peer
        self.acl_cache = None


class Guard:
    """The broker's users and ACLs as an HTTP service asks them."""

    def __init__(self, config) -> None:
        directory = config.log_dirs[0]
        self.required = any(lst.sasl for lst in config.listeners)
        self.credentials = credentials.CredentialReader(credentials.path_in(directory))
        self.authorizer = Authorizer.from_config(config, directory)

    def caller(self, request: web.Request) -> Caller:
        """The authenticated caller (HttpError 401 when credentials are wanted and missing or wrong)."""
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if not self.required:
            cert = request.transport.get_extra_info("peercert") if request.transport else None
            name = tls.principal_of(cert)
            return self._on_behalf(request, Caller(f"User:{name}" if name else ANONYMOUS, peer))
        user, password = _basic(request.headers.get("Authorization", ""))
        if not self.authenticates(user, password):
            raise unauthorized()
        return self._on_behalf(request, Caller(f"User:{user}", peer))

    def authenticates(self, user: str, password: str) -> bool:
        """Whether the password is the user's, checked as SASL PLAIN checks it (PLAIN users, or SCRAM
        credentials by deriving the keys from it)."""
        try:
            sasl.PlainServer(self.credentials).step(b"\0" + user.encode() + b"\0" + password.encode())
        except sasl.AuthenticationFailed:
            return False
        return True

    def _on_behalf(self, request: web.Request, caller: Caller) -> Caller:
        """A peer broker (a super user) forwarding a request it authorised names whom it acts for."""
        behalf = request.headers.get(ON_BEHALF)
        if behalf and self.authorizer.enabled and caller.principal in self.authorizer.super_users:
            return Caller(behalf, caller.peer)
        return caller

    def check(self, caller: Caller, operation: int, resource_type: int, name: str) -> None:
        """HttpError 403 unless the ACLs allow the caller `operation` on the resource."""
        self.authorizer.refresh()
        if not self.authorizer.allowed(caller, operation, resource_type, name):
            what = acls.RESOURCE_NAMES[resource_type]
            raise HttpError(403, 40301, f"User {caller.principal} is denied operation "
                            f"{acls.OPERATION_NAMES[operation]} on {what}:{name}")

    def check_cluster(self, caller: Caller, operation: int) -> None:
        self.check(caller, operation, acls.CLUSTER, acls.CLUSTER_NAME)


def unauthorized() -> HttpError:
    return HttpError(401, 401, "Unauthorized", headers={"WWW-Authenticate": REALM})


def _basic(header: str) -> tuple[str, str]:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        raise unauthorized()
    try:
        user, colon, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise unauthorized() from None
    if not colon or not user:
        raise unauthorized()
    return user, password
