"""The registry secured as the broker is: HTTPS with the broker's certificate, HTTP basic authentication
against its SASL users, the broker's ACLs deciding who may read, register, configure and delete."""

from __future__ import annotations

import base64
import shutil
import ssl

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from mmlog.security import acls
from mmlog.security.acls import ALLOW, CLUSTER, CLUSTER_NAME, DESCRIBE, LITERAL, TOPIC, WRITE, Binding
from mmlog.testing import EmbeddedBroker
from mmlog.testing.security import USERS, add_users, make_pki
from mmlog.web.auth import ON_BEHALF
from tests.registry.conftest import call, compact

BOB = ("bob", "bob-secret")
ACLS = [Binding(TOPIC, "orders", LITERAL, "User:alice", "*", WRITE, ALLOW),
        Binding(TOPIC, "orders", LITERAL, "User:bob", "*", DESCRIBE, ALLOW),
        Binding(CLUSTER, CLUSTER_NAME, LITERAL, "User:bob", "*", DESCRIBE, ALLOW)]


def schema(name: str) -> dict:
    return {"schema": compact({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(pki, tmp_path_factory):
    data = tmp_path_factory.mktemp("secured") / "data"
    add_users(data, {**USERS, BOB[0]: BOB[1]})
    acls.save(acls.path_in(data), ACLS)
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": f'x required username="admin" password="{USERS["admin"]}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "ssl.keystore.location": str(pki.server), "ssl.truststore.location": str(pki.ca),
        "schema.registry.listeners": "https://127.0.0.1:0,http://127.0.0.1:0",
    }
    with EmbeddedBroker(data, processors=1, config=config) as broker:
        yield broker


@pytest.fixture(scope="module")
def https(secured) -> str:
    return next(u for u in secured.registry_urls if u.startswith("https:"))


@pytest.fixture(scope="module")
def plain(secured) -> str:
    return next(u for u in secured.registry_urls if u.startswith("http:"))


def basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


ALICE, ADMIN = basic("alice", USERS["alice"]), basic("admin", USERS["admin"])


def test_confluent_kafka_over_https_with_basic_auth(pki, https):
    client = SchemaRegistryClient({"url": https, "ssl.ca.location": str(pki.ca),
                                   "basic.auth.user.info": f"alice:{USERS['alice']}"})
    schema_id = client.register_schema("orders-value", Schema(schema("Order")["schema"], "AVRO"))
    assert client.get_latest_version("orders-value").schema_id == schema_id


def test_https_presents_the_brokers_certificate(pki, https):
    refused = ssl.create_default_context()  # the system's CAs: the test CA is not among them
    with pytest.raises(OSError):
        call(https, "GET", "/", headers=ALICE, context=refused)
    assert call(https, "GET", "/", headers=ALICE, context=ssl.create_default_context(cafile=str(pki.ca))) == (200, {})


@pytest.mark.parametrize("headers", [{}, basic("alice", "wrong"), basic("nobody", "x"), {"Authorization": "Basic %%%"},
                                     {"Authorization": "Bearer abc"}])
def test_no_or_bad_credentials_are_a_401(plain, headers):
    status, body = call(plain, "GET", "/subjects", headers=headers)
    assert (status, body["error_code"]) == (401, 401)


def test_the_acls_decide_per_subject(plain):
    bob = basic(*BOB)
    assert call(plain, "POST", "/subjects/orders-value/versions", schema("Order"), headers=ALICE)[0] == 200
    assert call(plain, "GET", "/subjects/orders-value/versions", headers=bob) == (200, [1])
    refusals = [
        (bob, "POST", "/subjects/orders-value/versions", schema("Order2")),  # Topic WRITE
        (bob, "DELETE", "/subjects/orders-value", None),  # Topic DELETE
        (ALICE, "DELETE", "/subjects/orders-value", None),
        (bob, "PUT", "/config/orders-value", {"compatibility": "NONE"}),  # Topic ALTER_CONFIGS
        (ALICE, "PUT", "/mode/orders-value", {"mode": "READONLY"}),
        (ALICE, "POST", "/subjects/payments-value/versions", schema("Payment")),  # no ACL on the topic
        (ALICE, "POST", "/subjects/free-form/versions", schema("Free")),  # not a topic's: Cluster ALTER
        (bob, "PUT", "/config", {"compatibility": "NONE"}),  # Cluster ALTER_CONFIGS
        (ALICE, "GET", "/subjects/free-form/versions", None),  # Cluster DESCRIBE
    ]
    for headers, method, path, body in refusals:
        status, answer = call(plain, method, path, body, headers=headers)
        assert (status, answer["error_code"]) == (403, 40301), (method, path)
    assert call(plain, "POST", "/subjects/free-form/versions", schema("Free"), headers=ADMIN)[0] == 200
    assert call(plain, "GET", "/subjects/free-form/versions", headers=bob) == (200, [1])


def test_subjects_are_listed_as_far_as_the_caller_may_read_them(plain):
    for subject in ("orders-value", "hidden-value"):
        call(plain, "POST", f"/subjects/{subject}/versions", schema("Listed"), headers=ADMIN)
    assert "hidden-value" in call(plain, "GET", "/subjects", headers=ADMIN)[1]
    listed = call(plain, "GET", "/subjects", headers=ALICE)[1]
    assert "orders-value" in listed and "hidden-value" not in listed


def test_schemas_by_id_are_any_authenticated_users(plain):
    status, body = call(plain, "POST", "/subjects/hidden2-value/versions", schema("Hidden"), headers=ADMIN)
    assert status == 200
    assert call(plain, "GET", f"/schemas/ids/{body['id']}", headers=ALICE)[0] == 200
    assert call(plain, "GET", f"/schemas/ids/{body['id']}")[0] == 401


def test_only_a_super_user_may_act_on_behalf_of_another(plain):
    as_admin = {ON_BEHALF: "User:admin"}
    status, body = call(plain, "POST", "/subjects/behalf/versions", schema("Behalf"), headers={**ALICE, **as_admin})
    assert (status, body["error_code"]) == (403, 40301)  # alice naming admin is still alice
    as_bob = {ON_BEHALF: "User:bob"}
    status, body = call(plain, "POST", "/subjects/behalf/versions", schema("Behalf"), headers={**ADMIN, **as_bob})
    assert (status, body["error_code"]) == (403, 40301)  # a super user forwarding for bob: decided for bob
