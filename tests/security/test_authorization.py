"""ACL authorisation, as Kafka's AclAuthorizer decides it, seen through unmodified Kafka clients.

One broker per module with `authorizer.class.name` set, `super.users=User:admin`, and
SASL PLAIN users alice, bob and admin on a SASL_PLAINTEXT listener (a PLAINTEXT one
too: its clients are User:ANONYMOUS). Nothing is allowed that no ACL allows
(`allow.everyone.if.no.acl.found` is false). Each test names its own topics and
groups, so the ACLs of one test never decide another's.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, processors_caught_up
from mmlog.testing.security import add_users

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
kafka_admin = pytest.importorskip("kafka.admin")
kafka_errors = pytest.importorskip("kafka.errors")

from confluent_kafka import KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   ResourcePatternType, ResourceType)

USERS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
TIMEOUT = 15.0
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("acls") / "data"
    add_users(data, USERS)
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
              "group.initial.rebalance.delay.ms": "0", "connection.failed.authentication.delay.ms": "0", **METRICS_ON}
    with EmbeddedBroker(data, processors=2, config=config, ready_timeout=120) as broker:
        yield broker


def conf(broker, user: str | None) -> dict:
    """confluent-kafka settings for a user (None: the PLAINTEXT listener, User:ANONYMOUS)."""
    if user is None:
        return {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports['PLAINTEXT']}"}
    return {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": USERS[user]}


def kp_conf(broker, user: str) -> dict:
    return {"bootstrap_servers": f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}",
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": USERS[user]}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def admin(broker):
    return ck_admin.AdminClient(conf(broker, "admin"))


def allow(principal: str, operation, resource_type, resource: str, pattern=ResourcePatternType.LITERAL,
          permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource_type, resource, pattern, principal, "*", operation, permission)


def deny(principal: str, operation, resource_type, resource: str, pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return allow(principal, operation, resource_type, resource, pattern, AclPermissionType.DENY)


def grant(broker, *bindings) -> None:
    """Create ACLs as the super user and wait until every processor has them."""
    client = admin(broker)  # kept while its futures run
    for future in client.create_acls(list(bindings)).values():
        future.result(TIMEOUT)
    processors_caught_up(broker)


def create_topics(broker, *names: str) -> None:
    a = admin(broker)
    for future in a.create_topics([ck_admin.NewTopic(n, 1, 1) for n in names]).values():
        future.result(TIMEOUT)


def produce(broker, user: str | None, topic: str, n: int = 3) -> list:
    """Produce n records as user; the delivery errors (None for each record delivered)."""
    errors = []
    producer = ck.Producer({**conf(broker, user), "message.timeout.ms": 5000})
    for i in range(n):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(TIMEOUT)
    return errors


def end_offset(broker, topic: str) -> int:
    consumer = ck.Consumer({**conf(broker, "admin"), "group.id": name("probe")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]
    finally:
        consumer.close()


def consume(broker, user: str, topic: str, group: str, want: int):
    """(values read, the first error) of a subscribed consumer in `group`."""
    consumer = ck.Consumer({**conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    got, error = [], None
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(got) < want and error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is None:
                continue
            if msg.error() and msg.error().code() != KafkaError._PARTITION_EOF:
                error = msg.error()
            elif not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got, error


ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)


# ------------------------------------------------------------------ the ACL APIs


def test_confluent_kafka_admin_creates_describes_and_deletes_literal_and_prefixed_acls(acl_broker):
    topic, prefix = name("ck-acl"), name("ck-pre") + "."
    a = admin(acl_broker)
    bindings = [allow("User:alice", AclOperation.READ, ResourceType.TOPIC, topic),
                deny("User:bob", AclOperation.WRITE, ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED)]
    assert [f.result(TIMEOUT) for f in a.create_acls(bindings).values()] == [None, None]

    described = a.describe_acls(AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert set(bindings) <= set(described)
    # MATCH: every pattern that applies to one topic name
    matching = a.describe_acls(AclBindingFilter(ResourceType.TOPIC, prefix + "x", ResourcePatternType.MATCH, None,
                                                None, AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert matching == [bindings[1]]

    deleted = list(a.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                                   AclOperation.ANY, AclPermissionType.ANY)]).values())[0]
    assert deleted.result(TIMEOUT) == [bindings[0]]
    left = a.describe_acls(ANY_ACL).result(TIMEOUT)
    assert bindings[0] not in left and bindings[1] in left


def test_kafka_python_admin_creates_describes_and_deletes_acls(acl_broker):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter)
    from kafka.admin import ResourceType as KpResourceType

    group = name("kp-group")
    client = kafka.KafkaAdminClient(**kp_conf(acl_broker, "admin"))
    try:
        acl = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.GROUP, group, ACLResourcePatternType.LITERAL))
        result = client.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        flt = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(KpResourceType.GROUP, group,
                                                               ACLResourcePatternType.LITERAL))
        found, error = client.describe_acls(flt)
        assert error is kafka_errors.NoError and [(a.principal, a.operation) for a in found] == \
            [("User:bob", ACLOperation.READ)]
        [(_, removed, error)] = client.delete_acls([flt])
        assert error is kafka_errors.NoError and len(removed) == 1
        assert client.describe_acls(flt)[0] == []
    finally:
        client.close()


def test_a_principal_without_alter_on_the_cluster_may_not_create_acls(acl_broker):
    alice = ck_admin.AdminClient(conf(acl_broker, "alice"))
    future = list(alice.create_acls([allow("User:alice", AclOperation.ALL, ResourceType.TOPIC, "*")]).values())[0]
    with pytest.raises(ck.KafkaException) as exc:
        future.result(TIMEOUT)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DescribeAcls needs DESCRIBE on the cluster (librdkafka drops DescribeAcls' top-level error: kafka-python shows it)
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType

    client = kafka.KafkaAdminClient(**kp_conf(acl_broker, "alice"))
    try:
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            client.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(
                KpResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        client.close()


def test_a_cluster_acl_must_name_kafka_cluster(acl_broker):
    client = admin(acl_broker)
    future = list(client.create_acls(
        [allow("User:alice", AclOperation.ALTER, ResourceType.BROKER, "not-the-cluster")]).values())[0]
    with pytest.raises(ck.KafkaException) as exc:
        future.result(TIMEOUT)
    assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_without_an_authoriser_the_acl_apis_answer_security_disabled(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1, ready_timeout=120) as broker:
        a = ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        future = list(a.create_acls([allow("User:alice", AclOperation.READ, ResourceType.TOPIC, "t")]).values())[0]
        with pytest.raises(ck.KafkaException) as exc:
            future.result(TIMEOUT)
        assert exc.value.args[0].code() == KafkaError.SECURITY_DISABLED


# ------------------------------------------------------------------ what they allow


def test_a_principal_allowed_to_write_topic_a_but_not_b_gets_topic_authorization_failed_for_b(acl_broker):
    a, b = name("write-a"), name("write-b")
    create_topics(acl_broker, a, b)
    # alice may describe B (so her producer gets as far as a Produce request), not write it
    grant(acl_broker, allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, a),
          allow("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, b))
    assert produce(acl_broker, "alice", a) == [None, None, None]
    errors = produce(acl_broker, "alice", b)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(acl_broker, a) == 3
    assert end_offset(acl_broker, b) == 0  # nothing appended


def test_kafka_python_producer_is_refused_a_topic_it_may_not_write(acl_broker):
    topic = name("kp-refused")
    create_topics(acl_broker, topic)
    grant(acl_broker, allow("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, topic),
          allow("User:bob", AclOperation.IDEMPOTENT_WRITE, ResourceType.BROKER, "kafka-cluster"))
    producer = kafka.KafkaProducer(**kp_conf(acl_broker, "bob"), retries=0)
    try:
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            producer.send(topic, b"no").get(TIMEOUT)
    finally:
        producer.close(1)
    assert end_offset(acl_broker, topic) == 0


def test_a_principal_allowed_to_read_with_group_g_only_is_refused_group_h(acl_broker):
    topic, g, h = name("read"), name("group-g"), name("group-h")
    create_topics(acl_broker, topic)
    grant(acl_broker, allow("User:bob", AclOperation.READ, ResourceType.TOPIC, topic),
          allow("User:bob", AclOperation.READ, ResourceType.GROUP, g))
    assert produce(acl_broker, "admin", topic, 5) == [None] * 5
    got, error = consume(acl_broker, "bob", topic, g, 5)
    assert (sorted(got), error) == ([b"v%d" % i for i in range(5)], None)
    got, error = consume(acl_broker, "bob", topic, h, 5)
    assert got == [] and error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_deny_beats_allow_whatever_the_patterns(acl_broker):
    prefix = name("deny") + "."
    open_topic, closed_topic = prefix + "open", prefix + "closed"
    create_topics(acl_broker, open_topic, closed_topic)
    grant(acl_broker, allow("User:alice", AclOperation.ALL, ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED),
          deny("User:alice", AclOperation.WRITE, ResourceType.TOPIC, closed_topic))
    assert produce(acl_broker, "alice", open_topic) == [None, None, None]
    assert [e.code() for e in produce(acl_broker, "alice", closed_topic)] == \
        [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(acl_broker, closed_topic) == 0


def test_a_prefixed_acl_allows_every_topic_its_prefix_starts_and_no_other(acl_broker):
    prefix = name("pre") + "."
    inside, outside = prefix + "one", name("outside")
    create_topics(acl_broker, inside, outside)
    grant(acl_broker, allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED))
    assert produce(acl_broker, "bob", inside) == [None, None, None]
    assert [e.code() for e in produce(acl_broker, "bob", outside)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3


def test_metadata_hides_the_topics_a_principal_may_not_describe(acl_broker):
    mine, hidden = name("visible"), name("hidden")
    create_topics(acl_broker, mine, hidden)
    grant(acl_broker, allow("User:alice", AclOperation.READ, ResourceType.TOPIC, mine))  # READ implies DESCRIBE
    seen = ck_admin.AdminClient(conf(acl_broker, "alice")).list_topics(timeout=TIMEOUT).topics
    assert mine in seen and hidden not in seen
    asked = ck_admin.AdminClient(conf(acl_broker, "alice")).list_topics(hidden, timeout=TIMEOUT).topics[hidden]
    assert asked.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in admin(acl_broker).list_topics(timeout=TIMEOUT).topics  # the super user sees everything


def test_anonymous_and_unlisted_principals_get_nothing_by_default(acl_broker):
    topic = name("closed")
    create_topics(acl_broker, topic)
    assert [e.code() for e in produce(acl_broker, None, topic, 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert topic not in ck_admin.AdminClient(conf(acl_broker, None)).list_topics(timeout=TIMEOUT).topics


def test_a_super_user_bypasses_every_acl(acl_broker):
    topic = name("super")
    create_topics(acl_broker, topic)
    grant(acl_broker, deny("User:*", AclOperation.ALL, ResourceType.TOPIC, topic))
    assert produce(acl_broker, "admin", topic) == [None, None, None]
    got, error = consume(acl_broker, "admin", topic, name("super-group"), 3)
    assert (len(got), error) == (3, None)


def test_an_acl_removed_takes_effect_without_a_restart(acl_broker):
    topic = name("revoked")
    create_topics(acl_broker, topic)
    binding = allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, topic)
    grant(acl_broker, binding)
    assert produce(acl_broker, "bob", topic, 1) == [None]
    a = admin(acl_broker)
    list(a.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                                         AclOperation.WRITE, AclPermissionType.ALLOW)]).values())[0].result(TIMEOUT)
    processors_caught_up(acl_broker)
    assert [e.code() for e in produce(acl_broker, "bob", topic, 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert end_offset(acl_broker, topic) == 1


def test_creating_topics_needs_create_and_deleting_them_delete(acl_broker):
    mine, other = name("made"), name("not-made")
    grant(acl_broker, allow("User:alice", AclOperation.CREATE, ResourceType.TOPIC, mine),
          allow("User:alice", AclOperation.DELETE, ResourceType.TOPIC, mine))
    alice = ck_admin.AdminClient(conf(acl_broker, "alice"))
    futures = alice.create_topics([ck_admin.NewTopic(mine, 1, 1), ck_admin.NewTopic(other, 1, 1)])
    futures[mine].result(TIMEOUT)
    with pytest.raises(ck.KafkaException) as exc:
        futures[other].result(TIMEOUT)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert other not in admin(acl_broker).list_topics(timeout=TIMEOUT).topics
    alice.delete_topics([mine])[mine].result(TIMEOUT)


# ------------------------------------------------------------------ mmlog acls


def mmlog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmlog", *args], capture_output=True, text=True, timeout=60)


def test_mmlog_acls_adds_lists_and_removes_acls_with_kafka_acls_options(acl_broker, tmp_path):
    def where(user: str) -> list[str]:
        config = tmp_path / f"{user}.properties"
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                          "org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="{user}" password="{USERS[user]}";\n')
        return ["--bootstrap", f"127.0.0.1:{acl_broker.listener_ports['SASL_PLAINTEXT']}", "--command-config",
                str(config)]

    topic, group, prefix = name("cli"), name("cli-group"), name("cli-pre") + "."
    out = mmlog("acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe",
                "--topic", topic, "--group", group, *where("admin"))
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 4  # 2 operations x 2 resources
    out = mmlog("acls", "list", "--topic", topic, *where("admin"))
    assert out.stdout.splitlines() == [f"Topic:LITERAL:{topic}\tUser:alice\tAllow\tRead\tfrom host *",
                                       f"Topic:LITERAL:{topic}\tUser:alice\tAllow\tDescribe\tfrom host *"]
    out = mmlog("acls", "add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", prefix,
                "--resource-pattern-type", "prefixed", *where("admin"))
    assert out.returncode == 0, out.stderr
    out = mmlog("acls", "list", "--topic", prefix + "orders", "--resource-pattern-type", "match", *where("admin"))
    assert out.stdout.splitlines() == [f"Topic:PREFIXED:{prefix}\tUser:bob\tDeny\tWrite\tfrom host *"]
    out = mmlog("acls", "remove", "--allow-principal", "User:alice", "--topic", topic, "--group", group,
                *where("admin"))
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 4, out.stderr
    assert mmlog("acls", "list", "--topic", topic, *where("admin")).stdout == ""

    refused = mmlog("acls", "add", "--allow-principal", "User:alice", "--topic", topic, *where("alice"))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "ClusterAuthorization" in refused.stderr
    usage = mmlog("acls", "add", "--topic", topic, *where("admin"))
    assert usage.returncode == 2 and "--allow-principal" in usage.stderr


# ------------------------------------------------------------------ Kafka's per-API rules, on the wire

def _codes_by_partition(topics_field: str, partitions_field: str, code_field: str = "error_code"):
    return lambda r: [getattr(p, code_field) for t in getattr(r, topics_field) for p in getattr(t, partitions_field)]


# (what is asked, API module name, version, request fields, the answer's error codes, Kafka's codes). The asker
# is User:ANONYMOUS (the PLAINTEXT listener), which no ACL names: every request below is refused.
REFUSED = [
    ("produce", "produce", 8, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t-refused", "partition_data": [{"index": 0, "records": b"junk"}]}]},
     lambda r: [p.error_code for t in r.responses for p in t.partition_responses], [29]),
    ("transactional produce", "produce", 8, {"transactional_id": "tx", "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t-refused", "partition_data": [{"index": 0, "records": b"junk"}]}]},
     lambda r: [p.error_code for t in r.responses for p in t.partition_responses], [53]),
    ("fetch", "fetch", 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                            "rack_id": "", "topics": [{"topic": "t-refused", "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
     _codes_by_partition("responses", "partitions"), [29]),
    ("a follower's fetch", "fetch", 11, {"replica_id": 1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                         "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                         "forgotten_topics_data": [], "rack_id": "", "topics": [
                                             {"topic": "t-refused", "partitions": [
                                                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                  "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
     _codes_by_partition("responses", "partitions"), [29]),
    ("list offsets", "list_offsets", 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t-refused", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
     _codes_by_partition("topics", "partitions"), [29]),
    ("find a group's coordinator", "find_coordinator", 2, {"key": "g", "key_type": 0}, lambda r: [r.error_code], [30]),
    ("find a transaction's coordinator", "find_coordinator", 2, {"key": "tx", "key_type": 1},
     lambda r: [r.error_code], [53]),
    ("join a group", "join_group", 5, {"group_id": "g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000,
                                       "member_id": "", "protocol_type": "consumer",
                                       "protocols": [{"name": "range", "metadata": b""}]},
     lambda r: [r.error_code], [30]),
    ("commit offsets", "offset_commit", 7, {"group_id": "g", "generation_id": -1, "member_id": "", "topics": [
        {"name": "t-refused", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                              "committed_metadata": ""}]}]},
     _codes_by_partition("topics", "partitions"), [30]),
    ("create a topic", "create_topics", 4, {"topics": [{"name": "t-new", "num_partitions": 1,
                                                        "replication_factor": 1}], "timeout_ms": 5000},
     lambda r: [t.error_code for t in r.topics], [29]),
    ("delete a topic", "delete_topics", 3, {"topic_names": ["t-refused"], "timeout_ms": 5000},
     lambda r: [t.error_code for t in r.responses], [29]),
    ("describe a topic's and a broker's configs", "describe_configs", 3, {"resources": [
        {"resource_type": 2, "resource_name": "t-refused", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None}]},
     lambda r: [x.error_code for x in r.results], [29, 31]),
    ("an idempotent producer id", "init_producer_id", 1, {"transactional_id": None, "transaction_timeout_ms": -1},
     lambda r: [r.error_code], [31]),
    ("a transactional producer id", "init_producer_id", 1, {"transactional_id": "tx",
                                                            "transaction_timeout_ms": 60000},
     lambda r: [r.error_code], [53]),
    ("end a transaction", "end_txn", 2, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                         "committed": True}, lambda r: [r.error_code], [53]),
    ("write transaction markers", "write_txn_markers", 0, {"markers": [
        {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "t-refused", "partition_indexes": [0]}]}]},
     lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions], [31]),
    ("elect leaders", "elect_leaders", 1, {"election_type": 0, "topic_partitions": None, "timeout_ms": 5000},
     lambda r: [r.error_code], [31]),
    ("describe client quotas", "describe_client_quotas", 0, {"components": [], "strict": False},
     lambda r: [r.error_code], [31]),
    ("list groups", "list_groups", 2, {}, lambda r: [r.error_code, len(r.groups)], [0, 0]),
]


@pytest.mark.parametrize("what, api, version, fields, codes, expected", REFUSED, ids=[r[0] for r in REFUSED])
def test_each_api_refuses_as_kafka_does_a_principal_no_acl_allows(acl_broker, what, api, version, fields, codes,
                                                                    expected):
    import importlib

    from mmlog.replication.peer import PeerConnection

    schema = importlib.import_module(f"mmlog.protocol.messages.{api}")
    if what == "produce":
        create_topics(acl_broker, "t-refused")  # it exists: the refusal is the ACLs', not a missing topic
    peer = PeerConnection(("127.0.0.1", acl_broker.listener_ports["PLAINTEXT"]), "refused")
    try:
        assert codes(peer.request(schema.API_KEY, version, schema.REQUEST(**fields), TIMEOUT)) == expected
    finally:
        peer.close()
    if what == "produce":
        assert end_offset(acl_broker, "t-refused") == 0


def test_metadata_by_topic_id_answers_topic_authorization_failed_with_the_id_not_the_name(acl_broker):
    """Kafka: topic ids are not secret, so asking by the id of a topic one may not describe answers
    TOPIC_AUTHORIZATION_FAILED with that id and a null name (an unknown id: UNKNOWN_TOPIC_ID)."""
    import uuid as uuid_module

    from mmlog.protocol.messages import metadata
    from mmlog.replication.peer import PeerConnection
    from mmlog.security.client import ClientSecurity

    topic = name("by-id")
    create_topics(acl_broker, topic)
    as_admin = PeerConnection(("127.0.0.1", acl_broker.listener_ports["SASL_PLAINTEXT"]), "admin",
                              ClientSecurity.from_options("SASL_PLAINTEXT", "PLAIN", "admin", USERS["admin"]))
    anonymous = PeerConnection(("127.0.0.1", acl_broker.listener_ports["PLAINTEXT"]), "anonymous")
    try:
        by_name = as_admin.request(metadata.API_KEY, 12, metadata.REQUEST(
            topics=[{"name": topic}], allow_auto_topic_creation=False), TIMEOUT)
        topic_id = by_name.topics[0].topic_id
        assert by_name.topics[0].error_code == 0 and topic_id != uuid_module.UUID(int=0)
        stranger = uuid_module.uuid4()
        answer = anonymous.request(metadata.API_KEY, 12, metadata.REQUEST(
            topics=[{"name": None, "topic_id": topic_id}, {"name": None, "topic_id": stranger}],
            allow_auto_topic_creation=False), TIMEOUT)
    finally:
        as_admin.close()
        anonymous.close()
    assert sorted((t.error_code, t.name, t.topic_id) for t in answer.topics) == sorted(
        [(29, None, topic_id), (100, None, stranger)])
