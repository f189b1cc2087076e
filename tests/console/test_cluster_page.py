"""The Cluster page of a three-broker ZooKeeper cluster in a real headless browser: every broker listed with
its controller and start time; once a broker is killed, the under-replicated partitions are counted and
the count links to them; a topic whose min.insync.replicas is 3 is counted under min ISR too. Without SASL listeners there is no login (anonymous, as on the Kafka API)."""

from __future__ import annotations

import pytest

from mmlog.client.admin import Admin
from mmlog.testing.cluster import REPLICATION, three_brokers
from tests.console.conftest import wait_until

pytestmark = pytest.mark.usefixtures("chromium")
CONSOLE = {"console.listeners": "http://127.0.0.1:0", **REPLICATION}


def _by():
    from selenium.webdriver.common.by import By

    return By


def test_a_killed_broker_leaves_under_replicated_partitions_on_the_cluster_page(chromium, tmp_path, zk_connect):
    By = _by()
    with three_brokers(tmp_path, zk_connect, **CONSOLE) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic("replicated", 3, replication_factor=3)
            admin.create_topic("strict", 1, {"min.insync.replicas": "3"}, replication_factor=3)
        chromium.delete_all_cookies()
        chromium.get(brokers[0].console_urls[0])
        table = wait_until(chromium, lambda d: d.find_elements(By.ID, "brokers"), what="the brokers table")[0]
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["0", "1", "2"]
        assert all(r.find_elements(By.TAG_NAME, "td")[3].text for r in rows)  # up since
        assert chromium.find_element(By.ID, "count-under_replicated").text.startswith("0")

        brokers[2].kill()

        def counted(driver):
            driver.refresh()
            found = wait_until(driver, lambda d: d.find_elements(By.ID, "count-under_replicated"), what="counts")
            return found[0].text.split()[0] == "4" and found[0]  # every partition has lost its replica on 2

        under = wait_until(chromium, counted, timeout=40, what="under-replicated partitions")
        assert chromium.find_element(By.ID, "count-under_min_isr").text.split()[0] == "1"  # strict-0: ISR 2 < 3
        assert chromium.find_element(By.ID, "count-offline").text.split()[0] == "0"
        under.click()
        rows = wait_until(chromium, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, ".paged tbody tr")
                                               if r.text.startswith("replicated")], what="the partitions listed")
        cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
        assert sorted(int(c[1]) for c in cells) == [0, 1, 2]
        for _, _, leader, replicas, isr in cells:  # topic, partition, leader, replicas, ISR
            assert sorted(replicas.split(", ")) == ["0", "1", "2"] and sorted(isr.split(", ")) == ["0", "1"]
            assert leader in ("0", "1")
