"""ACLs in a three-broker cluster: stored in ZooKeeper as Kafka stores them, in force at every broker.

The brokers replicate over a SASL_PLAINTEXT inter-broker listener as user `broker`,
a super user (as in Kafka, the inter-broker principal goes in `super.users`, or
replication would be refused). An ACL created through broker 0 is written to
/kafka-acl/Topic/<name> with a change notification; broker 2 mirrors it and its
processors apply it within about a second.
"""

from __future__ import annotations

import json

import pytest

from mmlog.protocol.messages import metadata
from mmlog.replication.peer import PeerConnection
from mmlog.security import scram
from mmlog.security.client import ClientSecurity
from mmlog.testing.cluster import REPLICATION, three_brokers
from mmlog.testing.wait import wait_for

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,  # noqa: E402
                                   ResourceType)

PASSWORDS = {"broker": "b-secret", "admin": "a-secret", "alice": "alice-pw"}
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";'
TOPIC = "guarded"


def _conf(port: int, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}


def _topic_error(port: int, user: str) -> int:
    """The error code of Metadata for TOPIC, asked of one broker as user."""
    peer = PeerConnection(("127.0.0.1", port), "acl-test", ClientSecurity.from_options(
        "SASL_PLAINTEXT", "PLAIN", user, PASSWORDS[user]))
    try:
        answer = peer.request(metadata.API_KEY, 8, metadata.REQUEST(
            topics=[{"name": TOPIC}], allow_auto_topic_creation=False), 5)
        return answer.topics[0].error_code
    finally:
        peer.close()


def test_an_acl_created_through_broker_0_is_stored_in_zookeeper_and_enforced_at_broker_2(tmp_path, zk_connect, zk):  # noqa: F811
    for user, password in PASSWORDS.items():
        creds = {m: scram.credential(m, password).to_kafka() for m in scram.MECHANISMS}
        zk.create(f"/config/users/{user}", json.dumps({"version": 1, "config": creds}).encode(), makepath=True)
    config = {**REPLICATION, "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
              "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
              "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:broker;User:admin"}
    with three_brokers(tmp_path, zk_connect, **config) as brokers:
        port = {b.broker_id: b.listener_ports["INTERNAL"] for b in brokers}
        admin = ck_admin.AdminClient(_conf(port[0], "admin"))
        admin.create_topics([ck_admin.NewTopic(TOPIC, 1, 3)])[TOPIC].result(15)

        def replicated() -> bool:  # followers fetch as User:broker: a super user
            partition = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
            return len(partition.isrs) == 3
        wait_for(replicated, what="three replicas in sync under the authoriser")
        assert _topic_error(port[2], "alice") == 29  # TOPIC_AUTHORIZATION_FAILED

        binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
        list(admin.create_acls([binding]).values())[0].result(15)
        node = json.loads(zk.get(f"/kafka-acl/Topic/{TOPIC}")[0])
        assert node == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                "operation": "Write", "host": "*"}]}
        assert [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")] == \
            [f"Topic:{TOPIC}".encode()]

        wait_for(lambda: _topic_error(port[2], "alice") == 0, what="broker 2 allowing alice")
        # The produce goes to the partition's leader, which may be another broker: each learns the change
        # from ZooKeeper in its own time, so wait for all three (a loaded host may take seconds).
        wait_for(lambda: all(_topic_error(p, "alice") == 0 for p in port.values()), what="every broker allowing alice")

        errors = []
        producer = ck.Producer({**_conf(port[2], "alice"), "message.timeout.ms": 10000})
        for i in range(5):
            producer.produce(TOPIC, b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
        producer.flush(15)
        assert errors == [None] * 5

        # Kafka's layout puts the name in the node's path: a '/' in it would make a node no reader finds
        slashed = AclBinding(ResourceType.GROUP, "team/a", ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        with pytest.raises(ck.KafkaException) as refused:
            list(admin.create_acls([slashed]).values())[0].result(15)
        assert refused.value.args[0].code() == ck.KafkaError.INVALID_REQUEST
        assert not zk.exists("/kafka-acl/Group/team")
