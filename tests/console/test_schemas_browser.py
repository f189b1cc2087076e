"""The Schemas page in a real headless chromium: two versions side by side with the added lines marked, and
a compatibility level saved by a user allowed to, refused to one who is not."""

from __future__ import annotations

import pytest

from mmlog.testing.browser import chromium, log_in, missing, wait_for
from tests.console.secured_console import PASSWORDS, secured_broker
from tests.console.test_schemas_api import ADMIN, record
from tests.registry.conftest import call

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("schemas-browser") / "data", registry=True) as broker:
        for schema in (record("id"), record("id", "note")):
            status, body = call(broker.registry_urls[0], "POST", "/subjects/orders-value/versions",
                                {"schema": schema}, headers=ADMIN)
            assert status == 200, body
        yield broker


@pytest.fixture
def browser():
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def subject_page(browser, broker, user: str) -> None:
    log_in(browser, broker.console_urls[0], user, PASSWORDS[user])
    browser.get(broker.console_urls[0] + "#/schemas/orders-value")
    wait_for(lambda: browser.find_elements("css selector", "#diff tr.diff-equal"))


def save_level(browser, level: str) -> str:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "compat-level")).select_by_value(level)
    browser.find_element("id", "compat-save").click()
    return wait_for(lambda: browser.find_element("id", "compat-message").text)


def test_the_versions_differences_are_marked_and_the_level_is_saved(broker, browser):
    subject_page(browser, broker, "alice")
    added = [row.text for row in browser.find_elements("css selector", "#diff tr.diff-insert, #diff tr.diff-replace")]
    assert any('"note"' in text for text in added), added
    assert save_level(browser, "FULL") == "Saved: FULL"
    assert call(broker.registry_urls[0], "GET", "/config/orders-value", headers=ADMIN) == (
        200, {"compatibilityLevel": "FULL"})


def test_a_user_without_rights_sees_the_level_change_refused(broker, browser):
    subject_page(browser, broker, "bob")
    assert save_level(browser, "NONE") == "Refused: you may not change this subject's level."
    _, body = call(broker.registry_urls[0], "GET", "/config/orders-value?defaultToGlobal=true", headers=ADMIN)
    assert body["compatibilityLevel"] != "NONE"
