"""The REST API as Confluent Schema Registry answers it: paths, status codes, error codes and bodies."""

from __future__ import annotations

import json

import pytest

from tests.registry.conftest import call, compact

RECORD = {"type": "record", "name": "R", "namespace": "api", "fields": [{"name": "a", "type": "int"}]}


def avro(doc=RECORD, **more) -> dict:
    return {"schema": compact(doc), **more}


def with_field(name: str, default=True) -> dict:
    extra = {"name": name, "type": "string", **({"default": ""} if default else {})}
    return {**RECORD, "fields": RECORD["fields"] + [extra]}


def test_the_root_and_the_schema_types(url):
    assert call(url, "GET", "/") == (200, {})
    status, types = call(url, "GET", "/schemas/types")
    assert status == 200 and sorted(types) == ["AVRO", "JSON", "PROTOBUF"]


def test_a_registered_version_reads_back_in_every_form(url):
    forms = {**RECORD, "name": "Forms"}
    status, body = call(url, "POST", "/subjects/forms-value/versions", avro(forms))
    assert status == 200
    schema_id = body["id"]
    assert call(url, "GET", "/subjects/forms-value/versions") == (200, [1])
    assert call(url, "GET", "/subjects/forms-value/versions/1") == (200, {
        "subject": "forms-value", "version": 1, "id": schema_id, "schema": compact(forms)})
    assert call(url, "GET", "/subjects/forms-value/versions/latest")[1]["version"] == 1
    assert call(url, "GET", "/subjects/forms-value/versions/-1")[1]["version"] == 1
    assert call(url, "GET", "/subjects/forms-value/versions/1/schema") == (200, forms)
    assert call(url, "GET", f"/schemas/ids/{schema_id}") == (200, {"schema": compact(forms)})
    assert call(url, "GET", f"/schemas/ids/{schema_id}/schema") == (200, forms)
    assert call(url, "GET", f"/schemas/ids/{schema_id}/subjects")[1] == ["forms-value"]
    assert call(url, "GET", f"/schemas/ids/{schema_id}/versions")[1] == [{"subject": "forms-value", "version": 1}]
    assert call(url, "POST", "/subjects/forms-value", avro(forms))[1]["id"] == schema_id
    assert "forms-value" in call(url, "GET", "/subjects")[1]
    assert call(url, "GET", "/subjects?subjectPrefix=forms")[1] == ["forms-value"]


@pytest.mark.parametrize("path,code", [
    ("/subjects/none-value/versions", 40401),
    ("/subjects/none-value/versions/1", 40401),
    ("/schemas/ids/999999", 40403),
])
def test_what_is_not_there_is_a_404_with_its_code(url, path, code):
    status, body = call(url, "GET", path)
    assert (status, body["error_code"]) == (404, code) and body["message"]


def test_versions_and_lookups_that_do_not_exist(url):
    call(url, "POST", "/subjects/missing-value/versions", avro())
    assert call(url, "GET", "/subjects/missing-value/versions/7")[1]["error_code"] == 40402
    for bad in ("0", "abc", "2147483648"):
        status, body = call(url, "GET", f"/subjects/missing-value/versions/{bad}")
        assert (status, body["error_code"]) == (422, 42202)
    status, body = call(url, "POST", "/subjects/missing-value", avro(with_field("other")))
    assert (status, body["error_code"]) == (404, 40403)
    status, body = call(url, "POST", "/subjects/nobody-value", avro())
    assert (status, body["error_code"]) == (404, 40401)


def test_an_invalid_schema_is_a_422_and_writes_nothing(url):
    for request in ({"schema": "{not json"}, {"schema": compact({"type": "nosuchtype"})},
                    {"schema": "x", "schemaType": "XML"}, {}):
        status, body = call(url, "POST", "/subjects/invalid-value/versions", request)
        assert (status, body["error_code"]) == (422, 42201), request
    assert call(url, "GET", "/subjects/invalid-value/versions")[1]["error_code"] == 40401


def test_an_incompatible_schema_is_a_409_with_the_reasons(url):
    call(url, "POST", "/subjects/compat-value/versions", avro())
    status, body = call(url, "POST", "/subjects/compat-value/versions", avro(with_field("b", default=False)))
    assert (status, body["error_code"]) == (409, 409) and "b" in body["message"]
    assert call(url, "GET", "/subjects/compat-value/versions")[1] == [1]
    check = "/compatibility/subjects/compat-value/versions/latest?verbose=true"
    status, body = call(url, "POST", check, avro(with_field("b", default=False)))
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert call(url, "POST", check, avro(with_field("b")))[1] == {"is_compatible": True, "messages": []}
    assert call(url, "POST", "/compatibility/subjects/compat-value/versions/9", avro())[1]["error_code"] == 40402
    assert call(url, "POST", "/subjects/compat-value/versions", avro(with_field("b")))[0] == 200


def test_compatibility_levels_global_and_per_subject(url):
    assert call(url, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    status, body = call(url, "PUT", "/config/levels-value", {"compatibility": "sideways"})
    assert (status, body["error_code"]) == (422, 42203)
    status, body = call(url, "GET", "/config/levels-value")
    assert (status, body["error_code"]) == (404, 40408)
    assert call(url, "GET", "/config/levels-value?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(url, "PUT", "/config/levels-value", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert call(url, "GET", "/config/levels-value") == (200, {"compatibilityLevel": "NONE"})
    call(url, "POST", "/subjects/levels-value/versions", avro())
    assert call(url, "POST", "/subjects/levels-value/versions", avro(with_field("z", default=False)))[0] == 200
    assert call(url, "DELETE", "/config/levels-value") == (200, {"compatibilityLevel": "NONE"})
    assert call(url, "GET", "/config/levels-value")[1]["error_code"] == 40408


def test_soft_then_permanent_deletes(url):
    for version in (RECORD, with_field("b")):
        call(url, "POST", "/subjects/gone-value/versions", avro(version))
    status, body = call(url, "DELETE", "/subjects/gone-value/versions/1?permanent=true")
    assert (status, body["error_code"]) == (404, 40407)
    assert call(url, "DELETE", "/subjects/gone-value/versions/1") == (200, 1)
    assert call(url, "DELETE", "/subjects/gone-value/versions/1")[1]["error_code"] == 40406
    assert call(url, "GET", "/subjects/gone-value/versions/1")[1]["error_code"] == 40402
    assert call(url, "GET", "/subjects/gone-value/versions/1?deleted=true")[1]["version"] == 1
    assert call(url, "GET", "/subjects/gone-value/versions?deleted=true")[1] == [1, 2]
    assert call(url, "DELETE", "/subjects/gone-value/versions/1?permanent=true") == (200, 1)
    assert call(url, "GET", "/subjects/gone-value/versions?deleted=true")[1] == [2]

    assert call(url, "DELETE", "/subjects/gone-value?permanent=true")[1]["error_code"] == 40405
    assert call(url, "DELETE", "/subjects/gone-value") == (200, [2])
    assert call(url, "DELETE", "/subjects/gone-value")[1]["error_code"] == 40404
    assert "gone-value" not in call(url, "GET", "/subjects")[1]
    assert "gone-value" in call(url, "GET", "/subjects?deleted=true")[1]
    assert call(url, "DELETE", "/subjects/gone-value?permanent=true") == (200, [2])
    assert call(url, "GET", "/subjects/gone-value/versions?deleted=true")[1]["error_code"] == 40401
    assert call(url, "DELETE", "/subjects/gone-value")[1]["error_code"] == 40401


def test_a_subject_registered_again_after_a_soft_delete_goes_on_numbering(url):
    call(url, "POST", "/subjects/again-value/versions", avro())
    call(url, "DELETE", "/subjects/again-value")
    assert call(url, "POST", "/subjects/again-value/versions", avro())[0] == 200
    assert call(url, "GET", "/subjects/again-value/versions")[1] == [2]


def test_references_and_referencedby(url):
    inner = {"type": "record", "name": "Inner", "namespace": "refs", "fields": [{"name": "x", "type": "int"}]}
    outer = {"type": "record", "name": "Outer", "namespace": "refs", "fields": [{"name": "in", "type": "refs.Inner"}]}
    call(url, "POST", "/subjects/inner-value/versions", avro(inner))
    ref = [{"name": "refs.Inner", "subject": "inner-value", "version": 1}]
    status, body = call(url, "POST", "/subjects/outer-value/versions", avro(outer, references=ref))
    assert status == 200
    outer_id = body["id"]
    assert call(url, "GET", "/subjects/inner-value/versions/1/referencedby") == (200, [outer_id])
    assert call(url, "GET", f"/schemas/ids/{outer_id}")[1]["references"] == ref
    status, body = call(url, "DELETE", "/subjects/inner-value/versions/1")
    assert (status, body["error_code"]) == (422, 42206)
    missing = [{"name": "refs.Inner", "subject": "inner-value", "version": 5}]
    status, body = call(url, "POST", "/subjects/outer2-value/versions", avro(outer, references=missing))
    assert (status, body["error_code"]) == (422, 42201)


def test_modes_readonly_and_import(url):
    assert call(url, "GET", "/mode") == (200, {"mode": "READWRITE"})
    assert call(url, "PUT", "/mode/ro-value", {"mode": "WRITEONLY"})[1]["error_code"] == 42204
    assert call(url, "GET", "/mode/ro-value")[1]["error_code"] == 40409
    assert call(url, "PUT", "/mode/ro-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = call(url, "POST", "/subjects/ro-value/versions", avro())
    assert (status, body["error_code"]) == (422, 42205)
    assert call(url, "DELETE", "/mode/ro-value") == (200, {"mode": "READONLY"})
    assert call(url, "POST", "/subjects/ro-value/versions", avro())[0] == 200

    status, body = call(url, "PUT", "/mode/ro-value", {"mode": "IMPORT"})
    assert (status, body["error_code"]) == (422, 42205)  # a subject that holds versions cannot import
    status, body = call(url, "POST", "/subjects/imported-value/versions", avro(id=50000, version=3))
    assert (status, body["error_code"]) == (422, 42205)  # ids are given only in IMPORT mode
    assert call(url, "PUT", "/mode/imported-value", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert call(url, "POST", "/subjects/imported-value/versions", avro(with_field("imp"), id=50000, version=3)) \
        == (200, {"id": 50000})
    assert call(url, "GET", "/subjects/imported-value/versions/3")[1]["id"] == 50000
    status, body = call(url, "POST", "/subjects/imported-value/versions", avro(with_field("other"), id=50000,
                                                                                version=4))
    assert (status, body["error_code"]) == (422, 42207)
    call(url, "PUT", "/mode/imported-value", {"mode": "READWRITE"})
    assert call(url, "POST", "/subjects/fresh-value/versions", avro(with_field("fresh")))[1]["id"] > 50000


def test_bodies_that_are_not_json_or_too_large(url):
    status, body = call(url, "POST", "/subjects/body-value/versions", raw=b"{nope")
    assert status in (400, 422) and body["error_code"] == status
    status, body = call(url, "POST", "/subjects/body-value/versions", {"schema": "x" * (17 * 1024 * 1024)})
    assert (status, body["error_code"]) == (413, 413)


def test_unknown_paths_answer_json_404(url):
    status, body = call(url, "GET", "/nothing/here")
    assert status == 404 and body["error_code"] == 404


def test_whitespace_and_the_normalize_flag_do_not_make_a_new_version(url):
    first = call(url, "POST", "/subjects/spaces-value/versions", avro())[1]["id"]
    spaced = {"schema": json.dumps(RECORD, indent=4)}
    assert call(url, "POST", "/subjects/spaces-value/versions", spaced) == (200, {"id": first})
    assert call(url, "POST", "/subjects/spaces-value/versions?normalize=true", spaced) == (200, {"id": first})
    assert call(url, "POST", "/subjects/spaces-value?normalize=true", spaced)[1]["version"] == 1
    assert call(url, "GET", "/subjects/spaces-value/versions")[1] == [1]


def test_a_schema_larger_than_the_topic_takes_is_refused_at_once(url):
    doc = {**RECORD, "name": "Huge", "doc": "x" * (2 * 1024 * 1024)}
    status, body = call(url, "POST", "/subjects/huge-value/versions", avro(doc))
    assert (status, body["error_code"]) == (422, 42209)
    assert call(url, "GET", "/subjects/huge-value/versions")[1]["error_code"] == 40401
    assert call(url, "POST", "/subjects/huge-value/versions", avro({**RECORD, "name": "Small"}))[0] == 200
