"""What the console's tests share: a broker whose Kafka listener requires SASL (users alice, bob and admin,
ACLs giving bob less), an HTTP caller that keeps a session's cookie like a browser, and a headless
chromium driven by Selenium (the browser tests skip, saying why, when either is missing)."""

from __future__ import annotations

import http.cookiejar
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mmlog.security import acls
from mmlog.security.acls import (ALLOW, ALTER_CONFIGS, CLUSTER, CLUSTER_NAME, DESCRIBE, DESCRIBE_CONFIGS, LITERAL,
                                 READ, TOPIC, WRITE, Binding)
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import USERS, add_users

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
BOB = ("bob", "bob-secret")
# alice may do everything with topics; bob may read and write them and read their configs, not alter them.
ACLS = [Binding(TOPIC, "*", LITERAL, "User:alice", "*", op, ALLOW)
        for op in (DESCRIBE, READ, WRITE, DESCRIBE_CONFIGS, ALTER_CONFIGS)]
ACLS += [Binding(TOPIC, "*", LITERAL, "User:bob", "*", op, ALLOW) for op in (DESCRIBE, READ, WRITE, DESCRIBE_CONFIGS)]
ACLS += [Binding(CLUSTER, CLUSTER_NAME, LITERAL, "User:alice", "*", DESCRIBE, ALLOW)]
SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "sasl.jaas.config": f'x required username="admin" password="{USERS["admin"]}";',
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
    "console.listeners": "http://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0",
    "connection.failed.authentication.delay.ms": 50, "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with a SASL_PLAINTEXT listener alone, its console and registry on one port."""
    data = tmp_path_factory.mktemp("console") / "data"
    add_users(data, {**USERS, BOB[0]: BOB[1]})
    acls.save(acls.path_in(data), ACLS)
    with EmbeddedBroker(data, processors=1, config=SECURED) as broker:
        yield broker


def admin_options(user: str = "admin") -> dict:
    password = {**USERS, BOB[0]: BOB[1]}[user]
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": password}


class Browser:
    """An HTTP caller with a cookie jar: what a browser does with the console's API, seen from outside."""

    def __init__(self, base: str) -> None:
        self.base = base.removesuffix("/console/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.csrf: str | None = None
        self.answers: list[tuple[dict, bytes]] = []  # every answer's headers and body, for the secret check

    def call(self, method: str, path: str, body=None, headers: dict | None = None, csrf: bool = True):
        """(status, JSON body, headers) of one request to /console/api<path>."""
        sent = {"Content-Type": "application/json", **(headers or {})}
        if csrf and self.csrf and method != "GET":
            sent["X-Csrf-Token"] = self.csrf
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}/console/api{path}", data=data, method=method, headers=sent)
        try:
            with self.opener.open(request, timeout=30) as reply:
                status, raw, got = reply.status, reply.read(), reply.headers
        except urllib.error.HTTPError as exc:
            status, raw, got = exc.code, exc.read(), exc.headers
        self.answers.append((dict(got), raw))
        return status, json.loads(raw) if raw else None, got

    def login(self, user: str, password: str) -> dict:
        status, body, _ = self.call("POST", "/login", {"user": user, "password": password})
        assert status == 200, body
        self.csrf = body["csrf"]
        return body


@pytest.fixture(scope="session")
def chromium():
    """A headless chromium (Selenium's WebDriver), shared by the browser tests of a run."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1400,1000", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(driver, check, timeout: float = 20.0, what: str = ""):
    """The first truthy check(driver) within timeout (Selenium's wait, AssertionError with the page's text)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: check(d))
    except TimeoutException:
        raise AssertionError(f"not seen in {timeout} s: {what}\n{driver.find_element('tag name', 'body').text}") \
            from None


def log_in(driver, console_url: str, user: str, password: str) -> None:
    """Open the console and log in through its form."""
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(console_url)
    form = wait_until(driver, lambda d: d.find_elements(By.ID, "login"), what="the login form")[0]
    form.find_element(By.NAME, "user").send_keys(user)
    form.find_element(By.NAME, "password").send_keys(password)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(driver, lambda d: d.find_element(By.ID, "who").text == user, what=f"logged in as {user}")
