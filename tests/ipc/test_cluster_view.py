"""The cluster view: what processors read, and how a group's coordinator is chosen."""

from __future__ import annotations

import collections

from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader


def view(*ids: int, controller: int = 0) -> ClusterView:
    return ClusterView({i: Endpoint(i, "127.0.0.1", 9000 + i) for i in ids}, controller)


def test_every_group_has_one_coordinator_and_groups_spread_over_the_brokers():
    groups = [f"group-{i}" for i in range(3000)]
    owners = collections.Counter(view(0, 1, 2).coordinator_for(g) for g in groups)
    assert set(owners) == {0, 1, 2}
    assert min(owners.values()) > 800  # roughly a third each


def test_only_the_groups_of_a_broker_that_leaves_move():
    groups = [f"group-{i}" for i in range(2000)]
    before = {g: view(0, 1, 2).coordinator_for(g) for g in groups}
    after = {g: view(0, 2).coordinator_for(g) for g in groups}
    assert all(after[g] == before[g] for g in groups if before[g] != 1)
    assert {after[g] for g in groups if before[g] == 1} == {0, 2}
    back = {g: view(0, 1, 2).coordinator_for(g) for g in groups}
    assert back == before  # and they return when it does


def test_no_live_broker_means_no_coordinator():
    assert ClusterView({}, -1).coordinator_for("g") == -1


def test_a_reader_sees_each_new_view_and_falls_back_until_one_is_written(tmp_path):
    reader = ViewReader(tmp_path, view(7, controller=7))
    assert reader.current() == view(7, controller=7)
    for ids in [(0, 1, 2), (0, 2), (0, 1, 2)]:  # rewritten quickly: each one is seen
        view(*ids).write(tmp_path)
        assert reader.current() == view(*ids)


def test_a_brokers_schema_registry_urls_travel_with_it():
    from mmlog.cluster import paths
    from mmlog.config.broker import BrokerConfig

    config = BrokerConfig.load(overrides={"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners":
                                          "PLAINTEXT://broker1:9092",
                                          "schema.registry.listeners": "http://0.0.0.0:8081,https://10.0.0.1:8443",
                                          "ssl.keystore.location": "/unread.pem"})
    me = Endpoint.of(config)
    assert me.registry == ("http://broker1:8081", "https://10.0.0.1:8443")  # a wildcard as the advertised host
    assert ClusterView.from_json(ClusterView.standalone(me).to_json()).brokers[0] == me
    doc = paths.load(paths.registration(me.host, me.port, me.rack, me.listeners, None, me.registry))
    assert doc["schema_registry_urls"] == list(me.registry)
    assert "schema_registry_urls" not in paths.load(paths.registration(me.host, me.port, me.rack, me.listeners))
