"""The registry of a three-broker cluster on ZooKeeper: one writer (the broker leading `_schemas`-0), every
broker serving reads from its own view, writes sent to a follower forwarded to the writer."""

from __future__ import annotations

import uuid

import pytest

from mmlog.testing.cluster import REPLICATION, leader_of, three_brokers
from mmlog.testing.wait import wait_for
from tests.registry.conftest import call, compact

CLUSTER_REGISTRY = {"schema.registry.listeners": "http://127.0.0.1:0", "default.replication.factor": 3,
                    "min.insync.replicas": 2, "schema.registry.timeout.ms": 5000, **REPLICATION}


def record(name: str) -> dict:
    return {"schema": compact({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    connect = f"{zookeeper.connect}/mmlog-{uuid.uuid4().hex[:12]}"
    with three_brokers(tmp_path_factory.mktemp("cluster"), connect, **CLUSTER_REGISTRY) as brokers:
        yield brokers


def test_registered_through_one_broker_read_from_every_other(cluster):
    first, *others = cluster
    status, body = call(first.registry_urls[0], "POST", "/subjects/spread-value/versions", record("Spread"))
    assert status == 200
    for broker in others:
        url = broker.registry_urls[0]
        wait_for(lambda url=url: call(url, "GET", "/subjects/spread-value/versions/1")[0] == 200,
                 what=f"broker {broker.broker_id} serving the new version")
        assert call(url, "GET", f"/schemas/ids/{body['id']}") == (200, {"schema": record("Spread")["schema"]})


def test_a_write_sent_to_a_follower_is_made_by_the_leader_and_read_back_at_once(cluster):
    call(cluster[0].registry_urls[0], "GET", "/subjects")  # the topic exists once any broker has written
    call(cluster[0].registry_urls[0], "POST", "/subjects/warm-value/versions", record("Warm"))
    leader = leader_of(cluster, "_schemas")
    follower = next(b for b in cluster if b is not leader)
    url = follower.registry_urls[0]
    status, body = call(url, "POST", "/subjects/forwarded-value/versions", record("Forwarded"))
    assert status == 200
    assert call(url, "GET", "/subjects/forwarded-value/versions/1")[1]["id"] == body["id"]  # no wait: its own view
    status, body = call(url, "PUT", "/config/forwarded-value", {"compatibility": "FULL"})
    assert (status, body) == (200, {"compatibility": "FULL"})
    assert call(url, "GET", "/config/forwarded-value") == (200, {"compatibilityLevel": "FULL"})
    status, body = call(url, "POST", "/subjects/forwarded-value/versions", {"schema": "{broken"})
    assert (status, body["error_code"]) == (422, 42201)  # the leader's refusal, as it answered it


def test_the_store_is_one_compacted_partition_replicated_as_the_cluster_defaults(cluster):
    from mmlog.client.admin import Admin

    call(cluster[0].registry_urls[0], "POST", "/subjects/store-value/versions", record("Store"))
    with Admin(cluster[0].bootstrap) as admin:
        described = admin.describe_topic("_schemas")
        config, _ = admin.topic_config("_schemas")
    assert len(described.partitions) == 1 and len(described.partitions[0].replicas) == 3
    assert config["cleanup.policy"] == "compact" and config["min.insync.replicas"] == "2"


def test_concurrent_registrations_through_every_broker_get_distinct_ids(cluster):
    from concurrent.futures import ThreadPoolExecutor

    def register(n: int) -> tuple[int, int, int]:
        url = cluster[n % 3].registry_urls[0]
        fresh = call(url, "POST", f"/subjects/many{n}-value/versions", record(f"Many{n}"))
        shared = call(url, "POST", f"/subjects/shared{n}-value/versions", record("Shared"))
        assert fresh[0] == shared[0] == 200, (fresh, shared)
        return n, fresh[1]["id"], shared[1]["id"]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(register, range(18)))
    assert len({fresh for _, fresh, _ in results}) == 18  # a new schema, a new id each
    assert len({shared for _, _, shared in results}) == 1  # one schema, one id, under every subject
    assert not {fresh for _, fresh, _ in results} & {results[0][2]}
