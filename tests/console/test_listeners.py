"""The console on the broker's one HTTP server: an address named by several services (metrics.listen,
schema.registry.listeners, console.listeners) is one port serving them all, and a service's paths are not
found on another's listener; without SASL listeners every visitor is anonymous, and an idle session ends."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

from mmlog.testing import EmbeddedBroker
from tests.console.conftest import Browser

SHARED = {"metrics.listen": "127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0",
          "console.listeners": "http://127.0.0.1:0,http://127.0.0.1:0", "console.session.timeout.ms": 1500}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("shared") / "data", processors=1, config=SHARED) as b:
        yield b


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_one_address_serves_every_service_named_on_it_and_others_only_their_own(broker):
    shared, own = (url.removesuffix("/console/") for url in broker.console_urls)
    assert broker.registry_urls == [shared]
    assert [status(shared + path) for path in ("/metrics", "/subjects", "/console/")] == [200, 200, 200]
    assert [status(own + path) for path in ("/metrics", "/subjects", "/console/")] == [404, 404, 200]


def test_without_sasl_listeners_the_console_asks_no_login(broker):
    browser = Browser(broker.console_urls[0])
    code, session, headers = browser.call("GET", "/session")
    assert code == 200 and session["login_required"] is False and session["principal"] == "User:ANONYMOUS"
    assert "HttpOnly" in headers["Set-Cookie"]
    code, body, _ = browser.call("POST", "/login", {"user": "anyone", "password": "x"})
    assert (code, body["error"]) == (400, "LOGIN_NOT_NEEDED")
    assert browser.call("GET", "/cluster")[0] == 200


def test_an_idle_session_ends(broker):
    browser = Browser(broker.console_urls[0])
    browser.call("GET", "/session")
    assert browser.call("GET", "/topics")[0] == 200
    time.sleep(2.0)  # console.session.timeout.ms=1500 without a request
    code, body, _ = browser.call("GET", "/topics")
    assert (code, body["error"]) == (401, "NOT_LOGGED_IN")
