"""Dynamic broker configs and client quotas in cluster mode: stored in ZooKeeper under Kafka's paths
(/config/brokers/<default>, /config/brokers/<id>, /config/clients/<id>) and applied by every broker."""

from __future__ import annotations

import json

from mmlog.cluster.dynamic_configs import DynamicConfigs
from mmlog.client.admin import Admin
from mmlog.testing.cluster import three_brokers
from mmlog.testing.wait import wait_for

DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3


def test_a_cluster_default_and_a_quota_reach_every_broker_and_a_broker_level_only_its_own(tmp_path, zk_connect,
                                                                                           zk):  # noqa: F811
    with three_brokers(tmp_path, zk_connect) as brokers:
        with Admin(brokers[1].bootstrap) as admin:
            admin.alter_broker_config(None, set={"log.retention.ms": "120000"})
            admin.alter_broker_config(1, set={"log.segment.bytes": "1048576"})
            admin.alter_client_quotas({(("client-id", "slow"),): {"producer_byte_rate": 1024}})
        assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {"log.retention.ms": "120000"}
        assert json.loads(zk.get("/config/brokers/1")[0])["config"] == {"log.segment.bytes": "1048576"}
        assert json.loads(zk.get("/config/clients/slow")[0])["config"] == {"producer_byte_rate": "1024"}
        for b in brokers:
            with Admin(b.bootstrap) as admin:
                admin.cluster.refresh([])
                admin._controller = lambda b=b: b.broker_id  # ask this broker, not the controller
                wait_for(lambda admin=admin, b=b: admin.broker_config(b.broker_id)["log.retention.ms"] ==
                         ("120000", DYNAMIC_DEFAULT), timeout=10, what=f"broker {b.broker_id}'s retention")
                segment = admin.broker_config(b.broker_id)["log.segment.bytes"]
                assert segment[1] == (DYNAMIC_BROKER if b.broker_id == 1 else 5)
                wait_for(lambda admin=admin: admin.describe_client_quotas() ==
                         {(("client-id", "slow"),): {"producer_byte_rate": 1024.0}}, timeout=10,
                         what=f"broker {b.broker_id}'s quotas")


class AnotherWriterFirst:
    """A ZooKeeper client whose first write of `path` lets another writer in between its read and its write:
    the interleaving that loses an update when a writer does not write the version it read."""

    def __init__(self, zk, path: str, other_write) -> None:
        self._zk, self._path, self._other_write = zk, path, other_write

    def __getattr__(self, name):
        return getattr(self._zk, name)

    def set(self, path, data, version=-1):
        if path == self._path and self._other_write is not None:
            self._other_write()
            self._other_write = None
        return self._zk.set(path, data, version=version)


def test_a_quota_written_while_another_broker_changes_the_users_password_keeps_the_new_password(zk):  # noqa: F811
    path = "/config/users/alice"
    zk.create(path, json.dumps({"version": 1, "config": {"SCRAM-SHA-256": "old"}}).encode(), makepath=True)

    def password_changed() -> None:  # another broker's AlterUserScramCredentials, landing mid-write
        zk.set(path, json.dumps({"version": 1, "config": {"SCRAM-SHA-256": "new"}}).encode())

    DynamicConfigs(AnotherWriterFirst(zk, path, password_changed), 0).write_quotas(
        {}, {"users/alice": {"producer_byte_rate": 1024}})
    assert json.loads(zk.get(path)[0])["config"] == {"SCRAM-SHA-256": "new", "producer_byte_rate": "1024"}
    assert zk.get_children("/config/changes")  # the other brokers are told
