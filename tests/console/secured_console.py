"""A broker with SASL listeners, ACLs and the console, and a console API session as a browser holds one
(the session cookie, the CSRF token): what the API tests of the console's pages share.

Users: `admin` (a super user), `alice` (ACLs below: reads and commits for groups `shop-*` and `lag-*`
and their topics), `bob` (may only describe them: he sees the groups and their lag, every change is
refused by the broker)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from contextlib import contextmanager

from mmlog.console.sessions import CSRF_HEADER
from mmlog.security import acls
from mmlog.security.acls import (ALL, ALLOW, CLUSTER, CLUSTER_NAME, DESCRIBE, GROUP, LITERAL, PREFIXED, READ,
                                 TOPIC, Binding)
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import USERS, add_users

BOB = ("bob", "bob-secret")
PASSWORDS = {**USERS, BOB[0]: BOB[1]}
ACLS = [Binding(GROUP, "shop-", PREFIXED, "User:alice", "*", READ, ALLOW),
        Binding(GROUP, "lag-", PREFIXED, "User:alice", "*", READ, ALLOW),
        Binding(TOPIC, "orders", PREFIXED, "User:alice", "*", ALL, ALLOW),
        Binding(TOPIC, "_schemas", LITERAL, "User:alice", "*", ALL, ALLOW),
        Binding(CLUSTER, CLUSTER_NAME, LITERAL, "User:alice", "*", DESCRIBE, ALLOW),
        Binding(GROUP, "shop-", PREFIXED, "User:bob", "*", DESCRIBE, ALLOW),
        Binding(TOPIC, "orders", PREFIXED, "User:bob", "*", DESCRIBE, ALLOW),
        Binding(CLUSTER, CLUSTER_NAME, LITERAL, "User:bob", "*", DESCRIBE, ALLOW)]


def kafka_options(user: str) -> dict:
    """mmlog.client options for a user on the SASL listener."""
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user]}


@contextmanager
def secured_broker(data, registry: bool = False, **more):
    add_users(data, PASSWORDS)
    acls.save(acls.path_in(data), ACLS)
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
              "sasl.jaas.config": f'x required username="admin" password="{USERS["admin"]}";',
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
              "console.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0, **more}
    if registry:
        config["schema.registry.listeners"] = "http://127.0.0.1:0"
    with EmbeddedBroker(data, processors=1, config=config) as broker:
        yield broker


class ApiError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        super().__init__(f"{status} {body}")
        self.status = status
        self.name = body.get("error")
        self.body = body


class ConsoleSession:
    """The console's JSON API as one logged-in browser calls it."""

    def __init__(self, url: str, user: str | None = None) -> None:
        self.url = url.rstrip("/").removesuffix("/console")
        self.cookie = ""
        self.csrf = ""
        if user is None:
            self.csrf = self.get("/session")["csrf"]
        else:
            self.csrf = self.post("/login", {"user": user, "password": PASSWORDS[user]})["csrf"]

    def call(self, method: str, path: str, body: dict | None = None):
        headers = {"Cookie": self.cookie, CSRF_HEADER: self.csrf}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.url + "/console/api" + path, data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                self._keep_cookie(reply.headers)
                return json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, json.loads(exc.read() or b"{}")) from None

    def _keep_cookie(self, headers) -> None:
        for value in headers.get_all("Set-Cookie") or ():
            self.cookie = value.split(";", 1)[0]

    def get(self, path: str):
        return self.call("GET", path)

    def post(self, path: str, body: dict):
        return self.call("POST", path, body)

    def put(self, path: str, body: dict):
        return self.call("PUT", path, body)
