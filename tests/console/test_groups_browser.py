"""The Groups page in a real headless chromium: a group's lag falls on the page as its consumer catches up;
its offsets are reset (a dry run, then applied); a user who may not commit for the group sees the reset
refused; and the Security page refuses anyone but a super user."""

from __future__ import annotations

import pytest

from mmlog.client import Consumer, Producer
from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from mmlog.testing.browser import chromium, log_in, missing, wait_for
from tests.console.secured_console import PASSWORDS, kafka_options, secured_broker

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

TOPIC, RECORDS = "orders-browser", 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("groups-browser") / "data") as broker:
        with Admin(broker.bootstrap, **kafka_options("admin")) as admin:
            admin.create_topic(TOPIC, 1)
        producer = Producer(broker.bootstrap, **kafka_options("admin"))
        for i in range(RECORDS):
            producer.send(TOPIC, value=b"%d" % i)
        producer.flush(30)
        producer.close()
        yield broker


@pytest.fixture
def admin(broker):
    with Admin(broker.bootstrap, **kafka_options("admin")) as admin:
        yield admin


@pytest.fixture
def browser():
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def by_id(driver, name: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, name)


def open_group(browser, broker, user: str, group: str) -> None:
    log_in(browser, broker.console_urls[0], user, PASSWORDS[user])
    browser.get(broker.console_urls[0] + f"#/groups/{group}")
    wait_for(lambda: by_id(browser, "group-lag").text != "")


def test_a_groups_lag_falls_on_its_page_as_its_consumer_catches_up(broker, browser):
    consumer = Consumer(broker.bootstrap, group_id="lag-browser", enable_auto_commit=False, session_timeout_ms=6000,
                        heartbeat_interval_ms=200, **kafka_options("alice"))
    consumer.subscribe([TOPIC])
    try:
        consumer.commit({(TOPIC, 0): 0})
        open_group(browser, broker, "alice", "lag-browser")
        seen = [int(by_id(browser, "group-lag").text)]
        for done in (20, 40, RECORDS):
            consumer.commit({(TOPIC, 0): done})
            consumer.poll(0.1)
            seen.append(int(wait_for(lambda: by_id(browser, "group-lag").text == str(RECORDS - done)
                                     and by_id(browser, "group-lag").text, timeout=15)))
    finally:
        consumer.close()
    assert seen == [60, 40, 20, 0]
    path = wait_for(lambda: by_id(browser, "lag-chart").find_element("css selector", "svg path.line"))
    assert path.get_attribute("d").count("L") >= 2  # a line through the samples the page saw


def test_a_groups_offsets_are_reset_after_a_dry_run(broker, browser, admin):
    from selenium.webdriver.support.ui import Select

    admin.alter_group_offsets("shop-browser-reset", {TopicPartition(TOPIC, 0): 50})
    open_group(browser, broker, "alice", "shop-browser-reset")
    Select(by_id(browser, "reset-target")).select_by_value("offset")
    by_id(browser, "reset-value").send_keys("5")
    by_id(browser, "reset-dry-run").click()
    plan = wait_for(lambda: by_id(browser, "reset-plan").text)
    assert f"{TOPIC} 0 50 5" in plan
    assert admin.committed_offsets("shop-browser-reset") == {TopicPartition(TOPIC, 0): 50}
    wait_for(lambda: by_id(browser, "reset-apply")).click()
    assert wait_for(lambda: by_id(browser, "reset-message").text) == "Reset 1 partition(s)."
    assert admin.committed_offsets("shop-browser-reset") == {TopicPartition(TOPIC, 0): 5}
    assert wait_for(lambda: by_id(browser, "group-lag").text == str(RECORDS - 5), timeout=15)


def test_a_user_without_rights_sees_the_reset_refused(broker, browser, admin):
    admin.alter_group_offsets("shop-browser-guarded", {TopicPartition(TOPIC, 0): 30})
    open_group(browser, broker, "bob", "shop-browser-guarded")
    by_id(browser, "reset-dry-run").click()
    wait_for(lambda: by_id(browser, "reset-apply")).click()
    message = wait_for(lambda: by_id(browser, "reset-message").text)
    assert message.startswith("Refused: GROUP_AUTHORIZATION_FAILED")
    assert admin.committed_offsets("shop-browser-guarded") == {TopicPartition(TOPIC, 0): 30}


def test_the_security_page_is_for_super_users_only(broker, browser):
    log_in(browser, broker.console_urls[0], "alice", PASSWORDS["alice"])
    browser.get(broker.console_urls[0] + "#/security")
    assert wait_for(lambda: by_id(browser, "security-refused").text) == "The Security page is for super users only."
    assert not browser.find_elements("css selector", ".page-security table")
