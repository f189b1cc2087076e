"""The Security page's API: super users see every user (names, mechanisms, iterations, never a secret) and
every ACL binding, paged and searched on the server; anyone else is refused."""

from __future__ import annotations

import pytest

from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import USERS
from tests.console.secured_console import BOB, ApiError, ConsoleSession, secured_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("security") / "data") as broker:
        yield broker


def test_a_super_user_sees_the_users_and_their_mechanisms_but_no_secret(broker):
    admin = ConsoleSession(broker.console_urls[0], "admin")
    users = admin.get("/security/users")
    assert [u["name"] for u in users["items"]] == ["admin", "alice", "bob"]
    assert users["items"][1]["mechanisms"] == [{"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                                               {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    text = repr(users)
    assert not any(word in text for word in ("salt", "stored_key", "server_key", *USERS.values(), BOB[1]))
    assert [u["name"] for u in admin.get("/security/users?q=BO")["items"]] == ["bob"]


def test_a_super_user_pages_through_the_acls(broker):
    admin = ConsoleSession(broker.console_urls[0], "admin")
    everything = admin.get("/security/acls?size=500")
    assert everything["total"] == 8
    assert {"resource_type": "Group", "name": "shop-", "pattern": "PREFIXED", "principal": "User:bob", "host": "*",
            "operation": "Describe", "permission": "Allow"} in everything["items"]
    first, second = admin.get("/security/acls?size=5"), admin.get("/security/acls?size=5&page=2")
    assert first["items"] + second["items"] == everything["items"]
    assert {b["principal"] for b in admin.get("/security/acls?q=user:bob")["items"]} == {"User:bob"}


@pytest.mark.parametrize("path", ["/security/users", "/security/acls"])
def test_anyone_but_a_super_user_is_refused(broker, path):
    alice = ConsoleSession(broker.console_urls[0], "alice")
    with pytest.raises(ApiError) as refused:
        alice.get(path)
    assert (refused.value.status, refused.value.name) == (403, "NOT_SUPER_USER")


def test_without_an_authoriser_the_page_lists_the_users_and_no_acls(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1, config={"console.listeners": "http://127.0.0.1:0"}) as b:
        anonymous = ConsoleSession(b.console_urls[0])
        assert anonymous.get("/security/users")["items"] == []
        assert anonymous.get("/security/acls") == {"items": [], "total": 0, "page": 1, "size": 50}
