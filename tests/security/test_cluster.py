"""Three brokers replicating over a SASL_SSL inter-broker listener (inter.broker.listener.name).

Clients use PLAINTEXT; the brokers reach each other only on INTERNAL (SASL_SSL,
SCRAM-SHA-512 as user `broker`, credentials in ZooKeeper's /config/users). Every
replica joining the ISR proves the followers' fetches authenticated; Metadata on
INTERNAL answers INTERNAL's ports (the listener the request came in on).
"""

from __future__ import annotations

import json

from mmlog.client import Admin, Producer
from mmlog.client.cluster import Cluster
from mmlog.security import scram
from mmlog.security.client import ClientSecurity
from mmlog.testing.cluster import REPLICATION, three_brokers
from mmlog.testing.wait import wait_for

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";'


def test_three_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(tmp_path, zk_connect, zk, pki):  # noqa: F811
    cred = scram.credential("SCRAM-SHA-512", "b-secret").to_kafka()
    zk.create("/config/users/broker", json.dumps({"version": 1, "config": {"SCRAM-SHA-512": cred}}).encode(),
              makepath=True)
    config = {**REPLICATION, "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
              "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
              "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
              "ssl.keystore.location": str(pki.server), "ssl.truststore.location": str(pki.ca),
              "ssl.client.auth": "none"}
    with three_brokers(tmp_path, zk_connect, **config) as brokers:
        bootstrap = brokers[0].bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topics({"secured": (2, {"min.insync.replicas": "2"})}, replication_factor=3)
            wait_for(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("secured").partitions),
                     what="every replica in sync")
        with Producer(bootstrap, acks="all", linger_ms=1) as producer:
            for i in range(100):
                producer.send("secured", b"v%d" % i, partition=i % 2)
            producer.flush()
        with Admin(bootstrap) as admin:
            wait_for(lambda: [p.latest for p in admin.describe_topic("secured").partitions] == [50, 50]
                     and all(len(p.isr) == 3 for p in admin.describe_topic("secured").partitions),
                     what="100 records acknowledged with three replicas in sync")
        internal = {b.broker_id: b.listener_ports["INTERNAL"] for b in brokers}
        meta = Cluster(f"127.0.0.1:{internal[0]}", timeout=10, security=ClientSecurity.from_options(
            "SASL_SSL", "SCRAM-SHA-512", "broker", "b-secret", ssl_cafile=str(pki.ca)))
        meta.refresh([])
        assert {n: b.port for n, b in meta.brokers.items()} == internal
        as_broker = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                     "sasl_plain_username": "broker", "sasl_plain_password": "b-secret", "ssl_cafile": str(pki.ca)}
        with Admin(f"127.0.0.1:{internal[0]}", **as_broker) as admin:  # a user made through broker 0 ...
            admin.set_user_password("carol", "c-secret")
        as_carol = {**as_broker, "sasl_plain_username": "carol", "sasl_plain_password": "c-secret"}

        def carol_logs_in_at_broker_2() -> bool:  # ... reaches broker 2 through ZooKeeper's watch
            with Admin(f"127.0.0.1:{internal[2]}", timeout=2, **as_carol) as admin:
                return isinstance(admin.list_topics(), dict)

        wait_for(carol_logs_in_at_broker_2, what="carol's credential at broker 2")
        assert "c-secret" not in zk.get("/config/users/carol")[0].decode()
        assert not any("failed authentication" in line and "'broker'" in line
                       for b in brokers for line in b.log_lines)  # the brokers' own logins never failed
