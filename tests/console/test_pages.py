"""The console driven in a real headless browser (Debian's chromium through Selenium) against a broker whose
Kafka listener requires SASL: logging in, records decoded by the schema registry, a record holding HTML
shown as text and never run, and a user without the right seeing their change refused."""

from __future__ import annotations

import json

import pytest

from mmlog.client import Producer
from mmlog.client.admin import Admin
from mmlog.client.serde import AvroSerializer, SchemaRegistry
from mmlog.testing.security import USERS
from tests.console.conftest import BOB, admin_options, log_in, wait_until

pytestmark = pytest.mark.usefixtures("chromium")
HOSTILE = '<script>window.pwned = "script"</script><img src=x onerror="window.pwned = \'img\'">'


def by(kind: str):
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def test_logging_in_shows_the_cluster(chromium, secured):
    log_in(chromium, secured.console_urls[0], "alice", USERS["alice"])
    table = wait_until(chromium, lambda d: d.find_elements(by("ID"), "brokers"), what="the brokers table")[0]
    assert secured.bootstrap.rsplit(":", 1)[1] in table.text and "yes" in table.text  # broker 0, controller
    assert chromium.get_cookie("mmlog-console")["httpOnly"] is True
    assert chromium.execute_script("return document.cookie") == ""  # a script sees no session id
    dirs = wait_until(chromium, lambda d: d.find_elements(by("CSS_SELECTOR"), "#log-dirs tbody a"), what="log dirs")
    dirs[0].click()  # the log dir's partition count: the list of its partitions
    wait_until(chromium, lambda d: "Partitions in" in d.find_element(by("TAG_NAME"), "h1").text,
               what="the log dir's partitions")


def test_a_record_holding_html_is_shown_as_text_and_never_run(chromium, secured):
    with Producer(secured.bootstrap, **admin_options()) as producer:
        producer.send("hostile", HOSTILE.encode(), key=b"<b>key</b>", partition=0,
                      headers=[("h", b"<i>header</i>")]).get(timeout=30)
    log_in(chromium, secured.console_urls[0], "alice", USERS["alice"])
    chromium.get(secured.console_urls[0] + "#/messages/hostile")
    row = wait_until(chromium, lambda d: d.find_elements(by("CSS_SELECTOR"), "#records tr.record"),
                     what="the record")[0]
    assert row.find_element(by("CSS_SELECTOR"), "td.value pre").text == HOSTILE
    assert "<b>key</b>" in row.text and "h: <i>header</i>" in row.text
    assert row.find_elements(by("TAG_NAME"), "img") == [] and row.find_elements(by("TAG_NAME"), "script") == []
    assert chromium.execute_script("return window.pwned === undefined")


def test_records_are_decoded_by_the_schema_registry(chromium, secured):
    schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"},
                                                           {"name": "item", "type": "string"}]}
    registry = SchemaRegistry(secured.registry_urls[0], username="admin", password=USERS["admin"])
    serialize = AvroSerializer(registry, json.dumps(schema))
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("orders", 1)
    with Producer(secured.bootstrap, **admin_options()) as producer:
        for i in range(3):
            producer.send("orders", serialize("orders", {"id": i, "item": f"widget-{i}"}), partition=0).get(30)
    registry.close()
    log_in(chromium, secured.console_urls[0], "alice", USERS["alice"])
    chromium.get(secured.console_urls[0] + "#/messages/orders?value_format=registry")
    wait_until(chromium, lambda d: len(d.find_elements(by("CSS_SELECTOR"), "#records tr.record")) == 3,
               what="three records")
    values = [json.loads(pre.text) for pre in chromium.find_elements(by("CSS_SELECTOR"), "#records td.value pre")]
    assert values == [{"id": i, "item": f"widget-{i}"} for i in (2, 1, 0)]
    assert "schema 1" in chromium.find_element(by("ID"), "records").text


def test_a_user_without_alter_configs_sees_their_change_refused(chromium, secured):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("guarded", 1)
    log_in(chromium, secured.console_urls[0], *BOB)
    chromium.get(secured.console_urls[0] + "#/topics/guarded")
    wait_until(chromium, lambda d: d.find_elements(by("ID"), "read-only"), what="the read-only note")
    assert chromium.find_elements(by("CSS_SELECTOR"), "#rate-chart svg.chart")  # the rate, drawn as SVG
    assert chromium.find_element(by("ID"), "partitions").text.count("\n") == 1  # a header and one partition
    field = chromium.find_element(by("CSS_SELECTOR"), 'input[data-config="retention.ms"]')
    field.clear()
    field.send_keys("1000")
    field.find_element(by("XPATH"), "../../td/button").click()
    toast = wait_until(chromium, lambda d: (t := d.find_element(by("ID"), "toast")).is_displayed() and t,
                       what="the refusal")
    assert toast.text.startswith("TOPIC_AUTHORIZATION_FAILED")
    with Admin(secured.bootstrap, **admin_options()) as admin:
        assert "retention.ms" not in admin.topic_config("guarded")[1]


def test_a_record_produced_from_the_form_is_shown(chromium, secured):
    with Admin(secured.bootstrap, **admin_options()) as admin:
        admin.create_topic("typed-in", 1)
    log_in(chromium, secured.console_urls[0], "alice", USERS["alice"])
    chromium.get(secured.console_urls[0] + "#/messages/typed-in")
    wait_until(chromium, lambda d: "0 records" in d.find_element(by("ID"), "browse-status").text, what="no records")
    chromium.find_element(by("NAME"), "produce-key").send_keys("k1")
    chromium.find_element(by("NAME"), "produce-value").send_keys("typed in a browser")
    chromium.find_element(by("ID"), "produce").click()
    row = wait_until(chromium, lambda d: d.find_elements(by("CSS_SELECTOR"), "#records tr.record"),
                     what="the produced record")[0]
    assert "typed in a browser" in row.text and "k1" in row.text
