"""The console's API seen from outside, without a browser, against a broker whose Kafka listener requires
SASL: a login against the broker's users, a session cookie a script cannot read nor another site send,
CSRF tokens on every change, the broker's ACLs deciding each read and action as they would on the Kafka
API, lists paged and filtered on the server, and no secret in any answer."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request

import pytest

from mmlog.client import Producer
from mmlog.client.admin import Admin
from mmlog.testing.security import USERS
from tests.console.conftest import BOB, Browser, admin_options


@pytest.fixture
def browser(secured) -> Browser:
    return Browser(secured.console_urls[0])


@pytest.fixture
def alice(browser) -> Browser:
    browser.login("alice", USERS["alice"])
    return browser


def test_without_a_login_every_api_call_is_refused_and_the_session_asks_for_one(browser):
    assert browser.call("GET", "/session")[:2] == (200, {"login_required": True, "user": None})
    for path in ("/cluster", "/topics", "/messages/any"):
        status, body, _ = browser.call("GET", path)
        assert (status, body["error"]) == (401, "NOT_LOGGED_IN")
    assert not list(browser.jar)  # no session was opened


def test_a_wrong_password_is_refused_and_opens_no_session(browser):
    status, body, headers = browser.call("POST", "/login", {"user": "alice", "password": "not-hers"})
    assert (status, body["error"]) == (401, "SASL_AUTHENTICATION_FAILED")
    assert "Set-Cookie" not in headers
    status, body, _ = browser.call("POST", "/login", {"user": "nobody", "password": "x"})
    assert status == 401


def test_the_session_cookie_is_http_only_and_same_site_strict(browser):
    status, body, headers = browser.call("POST", "/login", {"user": "alice", "password": USERS["alice"]})
    assert status == 200 and body["user"] == "alice"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
    [jar_cookie] = list(browser.jar)
    assert jar_cookie.value not in str(body)  # the id is in the cookie alone, never in a body a script reads


def test_no_secret_is_ever_sent_to_the_browser(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("secrets-checked", 2)
    for path in ("/session", "/cluster", "/topics", "/topics/secrets-checked", "/messages/secrets-checked",
                 "/cluster/partitions?state=under_replicated"):
        assert alice.call("GET", path)[0] == 200, path
    session_id = next(iter(alice.jar)).value
    for headers, raw in alice.answers:
        text = raw.decode() + str({k: v for k, v in headers.items() if k != "Set-Cookie"})
        for secret in (USERS["alice"], USERS["admin"], BOB[1], session_id):
            assert secret not in text


def test_a_change_without_the_sessions_csrf_token_is_refused(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("csrf-guarded", 1)
    change = {"set": {"retention.ms": "1234"}}
    status, body, _ = alice.call("PUT", "/topics/csrf-guarded/configs", change, csrf=False)
    assert (status, body["error"]) == (403, "CSRF_TOKEN_MISSING")
    status, body, _ = alice.call("PUT", "/topics/csrf-guarded/configs", change, csrf=False,
                                 headers={"X-Csrf-Token": "x" * len(alice.csrf)})
    assert (status, body["error"]) == (403, "CSRF_TOKEN_MISSING")
    # What a cross-site form could send: not JSON, so refused before anything else.
    status, body, _ = alice.call("PUT", "/topics/csrf-guarded/configs", change,
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415
    with Admin(secured.bootstrap, **admin_options()) as admin:
        assert "retention.ms" not in admin.topic_config("csrf-guarded")[1]
    assert alice.call("PUT", "/topics/csrf-guarded/configs", change)[0] == 200
    with Admin(secured.bootstrap, **admin_options()) as admin:
        config, overrides = admin.topic_config("csrf-guarded")
    assert config["retention.ms"] == "1234" and "retention.ms" in overrides
    status, topic, _ = alice.call("GET", "/topics/csrf-guarded")
    assert topic["can_alter"] is True
    assert {c["name"]: (c["value"], c["source"]) for c in topic["configs"]}["retention.ms"] == ("1234", "topic")
    assert alice.call("PUT", "/topics/csrf-guarded/configs", {"delete": ["retention.ms"]})[0] == 200
    status, topic, _ = alice.call("GET", "/topics/csrf-guarded")
    assert {c["name"]: c["source"] for c in topic["configs"]}["retention.ms"] != "topic"


def test_a_user_without_alter_configs_is_refused_as_the_kafka_api_would_refuse_them(secured, browser):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("bobs-view", 1)
    browser.login(*BOB)
    status, topic, _ = browser.call("GET", "/topics/bobs-view")
    assert status == 200 and topic["can_alter"] is False
    assert {c["name"]: c["source"] for c in topic["configs"]}["retention.ms"] != "topic"
    status, body, _ = browser.call("PUT", "/topics/bobs-view/configs", {"set": {"retention.ms": "1000"}})
    assert (status, body["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    status, body, _ = browser.call("GET", "/cluster/log-dirs")
    assert status == 200 and body["log_dirs"] == []  # DescribeLogDirs wants DESCRIBE on the cluster


def test_log_dirs_are_shown_to_a_user_who_may_describe_the_cluster(secured, alice):
    status, body, _ = alice.call("GET", "/cluster/log-dirs")
    [row] = body["log_dirs"]
    assert status == 200 and row["broker"] == 0 and row["dir"] == str(secured.data_dir)
    assert row["partitions"] >= 0 and 0 < row["free"] <= row["capacity"]


def test_a_log_dirs_partitions_are_listed_with_their_sizes(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("in-the-dir", 2)
    dir_ = str(secured.data_dir)
    status, body, _ = alice.call("GET", f"/cluster/log-dirs/partitions?broker=0&dir={urllib.parse.quote(dir_)}"
                                        "&q=in-the-dir")
    assert status == 200 and [(p["topic"], p["partition"]) for p in body["items"]] == [("in-the-dir", 0),
                                                                                      ("in-the-dir", 1)]
    assert all(p["size"] >= 0 for p in body["items"])
    assert alice.call("GET", "/cluster/log-dirs/partitions?broker=0&dir=/nowhere")[0] == 404
    assert alice.call("GET", "/cluster/log-dirs/partitions?broker=x&dir=/nowhere")[0] == 400


def test_topics_are_paged_and_filtered_on_the_server(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topics({f"paged-{i:02d}": (1, {}) for i in range(23)})
    status, body, _ = alice.call("GET", "/topics?q=PAGED-&size=10&page=3")
    assert status == 200 and body["total"] == 23 and body["page"] == 3
    assert [t["name"] for t in body["items"]] == ["paged-20", "paged-21", "paged-22"]
    assert alice.call("GET", "/topics?q=paged-07")[1]["total"] == 1
    assert alice.call("GET", "/topics?size=0")[0] == 400


def test_records_produced_and_browsed_newest_or_oldest_first_with_a_filter(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("browsed", 1)
    for i in range(6):
        status, body, _ = alice.call("POST", "/messages/browsed", {
            "key": f"k{i}", "value": f"value {i}" + (" needle" if i % 2 else ""), "headers": [["h", f"{i}"]]})
        assert (status, body["offset"]) == (200, i)
    status, body, _ = alice.call("GET", "/messages/browsed?limit=3")
    assert [r["offset"] for r in body["records"]] == [5, 4, 3] and body["next"] == 2
    assert body["records"][0]["key"]["shown"] == "k5" and body["records"][0]["headers"][0]["value"]["shown"] == "5"
    status, body, _ = alice.call("GET", "/messages/browsed?order=oldest&from=offset&offset=2&limit=2")
    assert [r["offset"] for r in body["records"]] == [2, 3]
    status, body, _ = alice.call("GET", "/messages/browsed?order=oldest&filter=NEEDLE")
    assert [r["offset"] for r in body["records"]] == [1, 3, 5]
    status, body, _ = alice.call("GET", "/messages/browsed?from=start&order=oldest&limit=1&value_format=hex")
    assert body["records"][0]["value"]["shown"] == b"value 0".hex(" ")


def test_a_value_is_shown_as_json_when_it_is_json(secured, alice):
    with Producer(secured.bootstrap, **admin_options()) as producer:
        producer.send("json-values", b'{"a": [1, 2]}', partition=0).get(timeout=30)
    status, body, _ = alice.call("GET", "/messages/json-values?value_format=json")
    assert status == 200 and body["records"][0]["value"]["shown"] == '{\n  "a": [\n    1,\n    2\n  ]\n}'


def test_logout_ends_the_session(secured, browser):
    browser.login(*BOB)
    [cookie] = list(browser.jar)
    assert browser.call("POST", "/logout")[0] == 200
    browser.jar.set_cookie(cookie)  # the old id, kept by someone: worth nothing now
    assert browser.call("GET", "/cluster")[0] == 401


def test_pages_carry_a_content_security_policy_allowing_the_consoles_own_scripts_only(secured):
    with urllib.request.urlopen(secured.console_urls[0], timeout=10) as reply:
        policy = reply.headers["Content-Security-Policy"]
        page = reply.read().decode()
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "object-src 'none'" in policy
    assert "<script type=\"module\" src=\"/console/static/app.js\">" in page


def test_browsing_goes_on_where_the_last_page_stopped(secured, alice):
    with Producer(secured.bootstrap, **admin_options()) as producer:
        for i in range(7):
            producer.send("paged-records", b"r%d" % i, partition=0)
        producer.flush(30)
    offsets, at = [], None
    while True:
        where = "" if at is None else f"&from=offset&offset={at}"
        status, body, _ = alice.call("GET", f"/messages/paged-records?limit=3{where}")
        offsets += [r["offset"] for r in body["records"]]
        at = body["next"]
        if at is None:
            break
    assert offsets == [6, 5, 4, 3, 2, 1, 0]
    status, body, _ = alice.call("GET", "/messages/paged-records?order=oldest&limit=4")
    assert [r["offset"] for r in body["records"]] == [0, 1, 2, 3] and body["next"] == 4
    status, body, _ = alice.call("GET", "/messages/paged-records?order=oldest&from=offset&offset=4&limit=4")
    assert [r["offset"] for r in body["records"]] == [4, 5, 6] and body["next"] is None


def test_a_topics_rate_is_measured_between_two_samples_of_its_offsets(secured, alice):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("rated", 2)
    assert alice.call("GET", "/topics/rated/rate")[1] == {"rate": []}  # one sample: no rate yet
    with Producer(secured.bootstrap, **admin_options()) as producer:
        for i in range(40):
            producer.send("rated", b"x", partition=i % 2)
        producer.flush(30)
    time.sleep(1.1)
    [[when, rate]] = alice.call("GET", "/topics/rated/rate")[1]["rate"]
    assert when > 0 and 0 < rate <= 40 / 1.1
    listed = alice.call("GET", "/topics?q=rated")[1]["items"]
    assert [(t["name"], t["records"], t["partitions"]) for t in listed] == [("rated", 40, 2)]
