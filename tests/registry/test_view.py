"""The registry's view applying `_schemas` records in order, as every broker's reader does."""

from __future__ import annotations

from mmlog.registry.records import CONFIG, DELETE_SUBJECT, SCHEMA, Key, SchemaValue, encode
from mmlog.registry.service import identify
from mmlog.registry.view import RegistryView
from tests.registry.conftest import compact


def avro(name: str) -> str:
    return compact({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})


def version(subject: str, number: int, schema_id: int, name: str, deleted: bool = False) -> tuple[bytes, bytes]:
    return Key(SCHEMA, subject, number).encode(), SchemaValue(subject, number, schema_id, avro(name),
                                                               deleted=deleted).encode()


def applied(*records) -> RegistryView:
    view = RegistryView(identify)
    for offset, (key, value) in enumerate(records):
        view.apply(offset, key, value)
    return view


def test_versions_ids_and_a_shared_id():
    view = applied(version("a", 1, 1, "A"), version("b", 1, 1, "A"), version("a", 2, 2, "A2"))
    assert list(view.versions("a")) == [1, 2] and view.ids[1].schema == avro("A")
    assert view.live_subjects() == ["a", "b"] and view.applied == 3 and view.max_id == 2


def test_a_subject_deleted_softly_then_for_good():
    view = applied(version("a", 1, 1, "A"), version("a", 2, 2, "A2"),
                   (Key(DELETE_SUBJECT, "a").encode(), encode({"subject": "a", "version": 2})))
    assert view.versions("a") == {} and list(view.versions("a", deleted=True)) == [1, 2]
    assert view.live_subjects() == [] and view.live_subjects(deleted=True) == ["a"]
    for number in (1, 2):
        view.apply(view.applied, Key(SCHEMA, "a", number).encode(), None)
    assert "a" not in view.subjects and view.ids == {} and view.max_id == 2  # the ids are not given again


def test_configs_set_and_removed():
    view = applied((Key(CONFIG, None).encode(), encode({"compatibilityLevel": "FULL"})),
                   (Key(CONFIG, "a").encode(), encode({"compatibilityLevel": "NONE"})))
    assert (view.level(None), view.level("a"), view.level("b")) == ("FULL", "NONE", "FULL")
    view.apply(2, Key(CONFIG, "a").encode(), None)
    assert view.level("a") == "FULL"


def test_one_id_given_to_two_schemas_keeps_the_first():
    view = applied(version("a", 1, 7, "A"), version("b", 1, 7, "B"))
    assert view.ids[7].schema == avro("A") and "b" not in view.subjects


def test_a_record_that_is_not_the_registrys_is_skipped():
    view = applied((b"not json", b"{}"), (b'{"keytype": "NOOP", "magic": 0}', None), version("a", 1, 1, "A"))
    assert view.applied == 3 and list(view.versions("a")) == [1]
