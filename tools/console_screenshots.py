"""Screenshots of the console's main pages, for docs/console/: a broker with some data, a headless chromium.

    python tools/console_screenshots.py [--out docs/console]

Starts a standalone broker (SASL users, ACLs, the schema registry and the console on loopback), makes
topics with JSON records, two versions of a schema, a consumer group catching up while its page is
shown (so its lag chart has a slope) and a minute of produce and fetch load (so the Metrics page has
samples); logs in as the super user and saves a PNG of each page. Needs selenium, /usr/bin/chromium and
/usr/bin/chromedriver.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmlog.client import Consumer, Producer  # noqa: E402
from mmlog.client.admin import Admin  # noqa: E402
from mmlog.client.records import TopicPartition  # noqa: E402
from mmlog.security import acls  # noqa: E402
from mmlog.security.acls import ALLOW, DESCRIBE, GROUP, PREFIXED, READ, TOPIC, Binding  # noqa: E402
from mmlog.testing import EmbeddedBroker  # noqa: E402
from mmlog.testing.browser import chromium, log_in  # noqa: E402
from mmlog.testing.security import USERS, add_users  # noqa: E402

ADMIN = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin",
         "sasl_plain_password": USERS["admin"]}
ACLS = [Binding(TOPIC, "orders", PREFIXED, "User:alice", "*", READ, ALLOW),
        Binding(GROUP, "billing-", PREFIXED, "User:alice", "*", READ, ALLOW),
        Binding(TOPIC, "payments", PREFIXED, "User:bob", "*", DESCRIBE, ALLOW)]
STEP = 15  # records a partition's commit moves on per round (about 30 a second)
SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}


def fill(broker: EmbeddedBroker) -> None:
    with Admin(broker.bootstrap, **ADMIN) as admin:
        admin.create_topics({"orders": (6, {}), "payments": (3, {"cleanup.policy": "compact"}),
                             "clicks": (12, {"retention.ms": "86400000"})})
        producer = Producer(broker.bootstrap, **ADMIN)
        for i in range(600):
            order = {"id": f"o-{i:05d}", "amount": round(3.5 + i * 1.25, 2), "note": "<b>gift</b>" if i % 7 == 0 else ""}
            producer.send("orders", key=f"o-{i:05d}".encode(), value=json.dumps(order).encode(),
                          headers=[("source", b"web")])
            producer.send("clicks", value=b"/catalogue/%d" % i)
        for i in range(40):
            producer.send("payments", key=b"customer-%d" % (i % 9), value=b'{"paid": %d}' % i)
        producer.flush(60)
        producer.close()
        for n in range(12):
            admin.alter_group_offsets(f"billing-{n:02d}", {TopicPartition("orders", p): 50 + 10 * n for p in range(6)})
        admin.alter_group_offsets("audit", {TopicPartition("payments", p): 5 for p in range(3)})
    url = broker.registry_urls[0]
    auth = "Basic " + __import__("base64").b64encode(f"admin:{USERS['admin']}".encode()).decode()
    for schema in (SCHEMA, {**SCHEMA, "fields": SCHEMA["fields"] + [
            {"name": "currency", "type": "string", "default": "EUR"}]}):
        request = urllib.request.Request(url + "/subjects/orders-value/versions", method="POST",
                                         data=json.dumps({"schema": json.dumps(schema)}).encode(),
                                         headers={"Content-Type": "application/json", "Authorization": auth})
        urllib.request.urlopen(request, timeout=60).read()


def load(broker: EmbeddedBroker, stop: threading.Event, burst_s: float) -> None:
    """Produce and fetch load for the Metrics page, and a group committing at most STEP records a round per
    partition, so that its lag grows during a burst of `burst_s` and falls after it (the group's chart)."""
    producer = Producer(broker.bootstrap, linger_ms=5, **ADMIN)
    consumer = Consumer(broker.bootstrap, group_id="billing-live", auto_offset_reset="earliest",
                        enable_auto_commit=False, **ADMIN)
    consumer.subscribe(["clicks"])
    seen: dict[tuple[str, int], int] = {}
    done: dict[tuple[str, int], int] = {}
    started = time.monotonic()
    while not stop.is_set():
        burst = time.monotonic() - started < burst_s
        for i in range(400 if burst else 20):
            producer.send("clicks", value=b"/load/%d" % i)
        producer.flush(30)
        for record in consumer.poll(0.2):
            tp = (record.topic, record.partition)
            seen[tp] = record.offset + 1
            done.setdefault(tp, record.offset)
        if seen:
            done = {tp: min(seen[tp], done[tp] + STEP) for tp in seen}
            consumer.commit(done)
        time.sleep(0.3)
    consumer.close()
    producer.close()


def shoot(driver, url: str, name: str, out: Path, wait_s: float = 2.0) -> None:
    driver.get(url)
    time.sleep(wait_s)
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 80, 2400)))
    time.sleep(0.5)
    driver.save_screenshot(str(out / f"{name}.png"))
    print(f"saved {out / (name + '.png')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "console"))
    parser.add_argument("--load-s", type=float, default=60.0, help="load before the pages are shot")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch, "data")
        add_users(data, {**USERS, "bob": "bob-secret"})
        acls.save(acls.path_in(data), ACLS)
        config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                  "sasl.jaas.config": f'x required username="admin" password="{USERS["admin"]}";',
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
                  "console.listeners": "http://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0",
                  "group.initial.rebalance.delay.ms": 0}
        with EmbeddedBroker(data, processors=2, config=config) as broker:
            fill(broker)
            stop = threading.Event()
            worker = threading.Thread(target=load, args=(broker, stop, args.load_s / 3), daemon=True)
            worker.start()
            driver = chromium()
            try:
                base = broker.console_urls[0]
                log_in(driver, base, "admin", USERS["admin"])
                driver.get(base + "#/groups/billing-live")
                time.sleep(args.load_s)  # the group's page refreshing: its lag chart fills; metrics are sampled
                for name, route in (("groups", "#/groups"), ("group", "#/groups/billing-live"),
                                    ("schemas", "#/schemas"), ("schema-diff", "#/schemas/orders-value"),
                                    ("security", "#/security"), ("metrics", "#/metrics"),
                                    ("cluster", "#/cluster"), ("topics", "#/topics"), ("topic", "#/topics/orders"),
                                    ("messages", "#/messages/orders")):
                    shoot(driver, base + route, name, out)
                    driver.set_window_size(1280, 900)
            finally:
                stop.set()
                worker.join(30)
                driver.quit()


if __name__ == "__main__":
    main()
