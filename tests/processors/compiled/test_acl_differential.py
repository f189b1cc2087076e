"""With an authoriser, the compiled path serves what the ACLs allow and leaves every refusal to the Python
handlers: the same requests get the same answers from both paths, and an ACL change is obeyed by the next
request on a connection the compiled path was serving.

Two brokers alike but for `compiled.request.path.enable`, each with `authorizer.class.name`, SASL PLAIN
users alice and bob on a SASL_PLAINTEXT listener and a PLAINTEXT one (User:ANONYMOUS). ACLs: alice may
WRITE and READ topic `granted`; everyone may WRITE topic `open`; nothing else is allowed.
"""

from __future__ import annotations

import random

import pytest

from mmlog.client import Admin
from mmlog.protocol.messages import fetch, produce
from mmlog.protocol.records import build_batch
from mmlog.replication.peer import PeerConnection
from mmlog.security import acls
from mmlog.security.client import ClientSecurity
from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON, scrape
from mmlog.testing.security import add_users
from mmlog.testing.wait import wait_for

USERS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
GRANTED, OPEN, CLOSED = "granted", "open", "closed"
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """(compiled, python), with the same users, topics and ACLs."""
    made = []
    try:
        for enable in ("true", "false"):
            data = tmp_path_factory.mktemp(f"acl-compiled-{enable}") / "data"
            add_users(data, USERS)
            broker = EmbeddedBroker(data, processors=1, config={
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
                "compiled.request.path.enable": enable, **METRICS_ON}).start()
            made.append(broker)
            with Admin(sasl_bootstrap(broker), **sasl_options("admin")) as admin:
                for topic in (GRANTED, OPEN, CLOSED):
                    admin.create_topic(topic, 1)
                admin.create_acls([allow(GRANTED, "User:alice", acls.WRITE), allow(GRANTED, "User:alice", acls.READ),
                                   allow(OPEN, "User:*", acls.WRITE)])
        yield tuple(made)
    finally:
        for broker in made:
            broker.stop()


def allow(topic: str, principal: str, operation: int) -> acls.Binding:
    return acls.Binding(acls.TOPIC, topic, acls.LITERAL, principal, "*", operation, acls.ALLOW)


def sasl_bootstrap(broker) -> str:
    return f"127.0.0.1:{broker.listener_ports['SASL_PLAINTEXT']}"


def sasl_options(user: str) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": USERS[user]}


def connect(broker, user: str | None) -> PeerConnection:
    """A request/response connection as `user` (SASL PLAIN), or as User:ANONYMOUS (None)."""
    listener = "PLAINTEXT" if user is None else "SASL_PLAINTEXT"
    peer = PeerConnection(("127.0.0.1", broker.listener_ports[listener]), "acl-differential",
                          ClientSecurity.from_options("PLAINTEXT"))
    if user is not None:
        security = ClientSecurity.from_options("SASL_PLAINTEXT", "PLAIN", user, USERS[user])
        security.authenticate(lambda module, version, body: peer.request(module.API_KEY, version, body, 5))
    return peer


def produce_request(topic: str, records: bytes):
    return produce.REQUEST(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}])


def fetch_request(topic: str):
    return fetch.REQUEST(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=[{"topic": topic, "partitions": [
                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                              "partition_max_bytes": 1 << 20}]}], forgotten_topics_data=[], rack_id="")


def exchange(broker, user: str | None, batches: list[bytes]) -> list:
    """Each user's requests in turn, each answer awaited: produces to every topic, then fetches of each."""
    peer = connect(broker, user)
    try:
        answers = []
        for records in batches:
            for topic in (GRANTED, OPEN, CLOSED):
                answers.append(peer.request(produce.API_KEY, 8, produce_request(topic, records), 5))
        for topic in (GRANTED, OPEN, CLOSED):
            answers.append(peer.request(fetch.API_KEY, 11, fetch_request(topic), 5))
        return answers
    finally:
        peer.close()


def compiled_requests(broker) -> float:
    return scrape(broker).get("mmlog_processor_requests_compiled_total", 0)


def error_codes(answer) -> list[int]:
    return [p.error_code for t in answer.responses for p in t.partition_responses]


def test_each_principal_gets_the_same_answers_from_both_paths(brokers):
    compiled, python = brokers
    rng = random.Random(5)
    for user in ("alice", "bob", None):
        batches = [build_batch([(None, rng.randbytes(rng.randint(1, 200)))], base_timestamp=1_700_000_000_000 + i)
                   for i in range(12)]
        before = compiled_requests(compiled)
        got = [exchange(b, user, batches) for b in brokers]
        assert got[0] == got[1], user
        refused = {"alice": {CLOSED}, "bob": {GRANTED, CLOSED}, None: {GRANTED, CLOSED}}[user]
        produced = got[0][:3]
        assert [error_codes(a) for a in produced] == [
            [TOPIC_AUTHORIZATION_FAILED if t in refused else 0] for t in (GRANTED, OPEN, CLOSED)]
        assert compiled_requests(compiled) - before >= 10, user  # the allowed ones, once the decisions are in
    assert compiled_requests(python) == 0


def test_a_revoked_acl_refuses_the_next_request_on_a_connection_compiled_code_served(brokers):
    compiled, _ = brokers
    topic = "revoked"
    spec = allow(topic, "User:alice", acls.WRITE)
    with Admin(sasl_bootstrap(compiled), **sasl_options("admin")) as admin:
        admin.create_topic(topic, 1)
        admin.create_acls([spec])
    peer = connect(compiled, "alice")
    try:
        def produced() -> int:
            answer = peer.request(produce.API_KEY, 8, produce_request(topic, build_batch([(None, b"v")])), 5)
            return error_codes(answer)[0]

        assert produced() == 0
        before = compiled_requests(compiled)
        assert [produced() for _ in range(5)] == [0] * 5
        assert compiled_requests(compiled) - before == 5
        with Admin(sasl_bootstrap(compiled), **sasl_options("admin")) as admin:
            admin.delete_acls([acls.Filter(*spec)])
        # The ACL file is re-read by each processor within about a second: from then on every answer refuses.
        wait_for(lambda: produced() == TOPIC_AUTHORIZATION_FAILED, what="the revoked WRITE refused")
        assert [produced() for _ in range(5)] == [TOPIC_AUTHORIZATION_FAILED] * 5
    finally:
        peer.close()
