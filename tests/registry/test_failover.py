"""The broker leading `_schemas`-0 SIGKILLed in the middle of a stream of registrations: every id a client
was given stays, on every surviving broker, with its schema; none is given twice."""

from __future__ import annotations

import threading
import time

from mmlog.testing.cluster import leader_of, three_brokers
from mmlog.testing.wait import wait_for
from tests.registry.conftest import call, compact
from tests.registry.test_cluster import CLUSTER_REGISTRY

COUNT = 40
KILL_AFTER = 10


def schema(i: int) -> str:
    return compact({"type": "record", "name": f"Kill{i}", "fields": [{"name": "a", "type": "int"}]})


def register_all(urls: list[str], acknowledged: dict, stop: threading.Event) -> None:
    """Register COUNT schemas one after another, each tried again (on any broker given) until answered."""
    for i in range(COUNT):
        attempt = 0
        while not stop.is_set():
            url = urls[attempt % len(urls)]
            attempt += 1
            try:
                status, body = call(url, "POST", f"/subjects/kill{i}-value/versions", {"schema": schema(i)})
            except OSError:
                status, body = None, None
            if status == 200:
                acknowledged[i] = body["id"]
                break
            assert status in (None, 500, 502, 503), (status, body)  # the cluster failing over, nothing else
            time.sleep(0.2)


def test_no_acknowledged_id_is_lost_or_given_twice_when_the_writer_dies(zk_connect, tmp_path):
    with three_brokers(tmp_path, zk_connect, **CLUSTER_REGISTRY) as brokers:
        assert call(brokers[0].registry_urls[0], "POST", "/subjects/first-value/versions",
                    {"schema": schema(COUNT)})[0] == 200
        leader = leader_of(brokers, "_schemas")
        survivors = [b for b in brokers if b is not leader]
        acknowledged: dict[int, int] = {}
        stop = threading.Event()
        writer = threading.Thread(target=register_all, args=([b.registry_urls[0] for b in survivors],
                                                             acknowledged, stop))
        writer.start()
        try:
            wait_for(lambda: len(acknowledged) >= KILL_AFTER, what="registrations before the kill")
            leader.kill()
            writer.join(120)
            assert not writer.is_alive(), f"{len(acknowledged)} of {COUNT} registered"
        finally:
            stop.set()
        assert len(acknowledged) == COUNT
        assert len(set(acknowledged.values())) == COUNT  # no id given twice
        for broker in survivors:
            url = broker.registry_urls[0]
            for i, schema_id in acknowledged.items():
                wait_for(lambda url=url, i=i: call(url, "GET", f"/subjects/kill{i}-value/versions/1")[0] == 200,
                         what=f"kill{i}-value on broker {broker.broker_id}")
                assert call(url, "GET", f"/subjects/kill{i}-value/versions/1")[1]["id"] == schema_id
                assert call(url, "GET", f"/schemas/ids/{schema_id}") == (200, {"schema": schema(i)})
