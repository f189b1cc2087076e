"""Console sessions on their own: random ids and tokens, the token compared in constant time, the least
recently used session ended (its clients closed) when the limit is reached, and nothing secret in what
the browser is given."""

from __future__ import annotations

from mmlog.console.clients import Clients, Target
from mmlog.console.sessions import Sessions

TARGET = Target("127.0.0.1:1", "SASL_PLAINTEXT")  # never reached: clients are made on first use only


def sessions(limit: int = 2) -> Sessions:
    return Sessions(lambda user, password: Clients(TARGET, user, password), timeout_s=60, limit=limit)


def test_each_session_has_its_own_random_id_and_token():
    made = sessions(10)
    a, b = made.create("alice", "pw-a"), made.create("alice", "pw-a")
    assert len({a.id, b.id, a.csrf, b.csrf}) == 4 and min(map(len, (a.id, a.csrf))) >= 40
    assert made.get(a.id) is a and made.get("forged") is None and made.get(None) is None


def test_the_csrf_token_must_be_the_sessions_own():
    session = sessions().create("alice", "pw")
    assert session.csrf_ok(session.csrf)
    assert not session.csrf_ok(None) and not session.csrf_ok("") and not session.csrf_ok(session.csrf[:-1] + "x")


def test_what_the_browser_is_given_holds_no_secret():
    session = sessions().create("alice", "the-password")
    shown = str(session.public())
    assert "the-password" not in shown and session.id not in shown and session.public()["user"] == "alice"


def test_the_least_recently_used_session_ends_when_the_limit_is_reached():
    made = sessions(limit=2)
    first, second = made.create("a", "x"), made.create("b", "y")
    made.get(first.id)  # used since: `second` is now the least recently used
    third = made.create("c", "z")
    assert len(made) == 2 and made.get(second.id) is None
    assert made.get(first.id) is first and made.get(third.id) is third
    made.end(first.id)
    assert made.get(first.id) is None and len(made) == 1
