"""The Schemas page's API: subjects paged and filtered by who may read them, a subject's versions, two versions
side by side with their line diff, the compatibility level changed by a user the ACLs allow and refused to
one they do not, the schema types."""

from __future__ import annotations

import base64
import json

import pytest

from mmlog.testing.security import USERS
from tests.console.secured_console import ApiError, ConsoleSession, secured_broker
from tests.registry.conftest import call

ADMIN = {"Authorization": "Basic " + base64.b64encode(f"admin:{USERS['admin']}".encode()).decode()}


def record(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": f, "type": "string", "default": ""} for f in fields]})


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("schemas") / "data", registry=True) as broker:
        url = broker.registry_urls[0]
        for subject, schemas in (("orders-value", [record("id"), record("id", "note")]),
                                 ("orders-key", [json.dumps({"type": "string"})]),
                                 ("payments-value", [record("amount")])):
            for schema in schemas:
                status, body = call(url, "POST", f"/subjects/{subject}/versions", {"schema": schema}, headers=ADMIN)
                assert status == 200, body
        yield broker


def test_subjects_are_listed_only_where_the_user_may_read_them(broker):
    alice = ConsoleSession(broker.console_urls[0], "alice")
    admin = ConsoleSession(broker.console_urls[0], "admin")
    assert [s["subject"] for s in admin.get("/schemas/subjects")["items"]] == [
        "orders-key", "orders-value", "payments-value"]
    found = alice.get("/schemas/subjects?q=VALUE")
    assert found["total"] == 1
    [row] = found["items"]
    assert (row["subject"], row["versions"], row["latest"], row["type"], row["compatibility"]) == (
        "orders-value", 2, 2, "AVRO", "BACKWARD")
    with pytest.raises(ApiError) as refused:
        alice.get("/schemas/subjects/payments-value")
    assert refused.value.status == 403


def test_two_versions_side_by_side_with_their_differences(broker):
    alice = ConsoleSession(broker.console_urls[0], "alice")
    detail = alice.get("/schemas/subjects/orders-value")
    assert [v["version"] for v in detail["versions"]] == [1, 2]
    assert "FULL_TRANSITIVE" in detail["levels"]
    compared = alice.get("/schemas/subjects/orders-value/compare?left=1&right=latest")
    assert (compared["left"]["version"], compared["right"]["version"], compared["same"]) == (1, 2, False)
    assert compared["left"]["text"].startswith('{\n  "type": "record"')
    added = [r["right"][1] for r in compared["diff"] if r["op"] in ("insert", "replace")]
    assert any('"note"' in line for line in added)
    assert all(r["left"][1] == r["right"][1] for r in compared["diff"] if r["op"] == "equal")


def test_the_level_is_changed_by_a_user_allowed_to_and_refused_to_others(broker):
    alice = ConsoleSession(broker.console_urls[0], "alice")
    bob = ConsoleSession(broker.console_urls[0], "bob")
    assert alice.put("/schemas/subjects/orders-value/compatibility", {"compatibility": "full"}) == {
        "subject": "orders-value", "compatibility": "FULL"}
    assert alice.get("/schemas/subjects/orders-value")["compatibility"] == "FULL"
    status, body = call(broker.registry_urls[0], "GET", "/config/orders-value", headers=ADMIN)
    assert (status, body["compatibilityLevel"]) == (200, "FULL")
    with pytest.raises(ApiError) as refused:
        bob.put("/schemas/subjects/orders-value/compatibility", {"compatibility": "NONE"})
    assert refused.value.status == 403
    with pytest.raises(ApiError) as invalid:
        alice.put("/schemas/subjects/orders-value/compatibility", {"compatibility": "SOMETIMES"})
    assert invalid.value.status == 422


def test_the_schema_types(broker):
    assert ConsoleSession(broker.console_urls[0], "bob").get("/schemas/types") == ["JSON", "PROTOBUF", "AVRO"]
