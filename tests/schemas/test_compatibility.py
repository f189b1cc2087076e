"""Compatibility levels as Confluent Schema Registry documents them: which changes each level lets through,
which versions it compares with, and how its reasons read."""

from __future__ import annotations

import json

import pytest

from mmlog.schemas import parse
from mmlog.schemas.compatibility import DEFAULT, LEVELS, UnknownLevel, check


def user(*fields):
    """A version of an Avro record with an `id` and the given extra fields."""
    return parse("AVRO", json.dumps({"type": "record", "name": "User", "namespace": "com.example",
                                     "fields": [{"name": "id", "type": "long"}, *fields]}))


EMAIL = {"name": "email", "type": "string"}
EMAIL_WITH_DEFAULT = {"name": "email", "type": "string", "default": ""}
V1 = user()


def test_the_levels_and_the_default():
    assert set(LEVELS) == {"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                           "FULL_TRANSITIVE", "NONE"}
    assert DEFAULT == "BACKWARD"


def test_an_unknown_level_is_a_typed_error():
    with pytest.raises(UnknownLevel, match="SIDEWAYS"):
        check("SIDEWAYS", V1, [V1])


def test_the_first_version_is_compatible_at_every_level():
    assert all(check(level, V1, []) == [] for level in LEVELS)


# The table of changes each level allows, in Confluent's documentation: (change, old, new, allowed levels).
CHANGES = [
    ("add a field with a default", user(), user(EMAIL_WITH_DEFAULT), {"BACKWARD", "FORWARD", "FULL", "NONE"}),
    ("add a field without a default", user(), user(EMAIL), {"FORWARD", "NONE"}),
    ("delete a field with a default", user(EMAIL_WITH_DEFAULT), user(), {"BACKWARD", "FORWARD", "FULL", "NONE"}),
    ("delete a field without a default", user(EMAIL), user(), {"BACKWARD", "NONE"}),
    ("widen int to long", user({"name": "n", "type": "int"}), user({"name": "n", "type": "long"}),
     {"BACKWARD", "NONE"}),
    ("narrow long to int", user({"name": "n", "type": "long"}), user({"name": "n", "type": "int"}),
     {"FORWARD", "NONE"}),
    ("string to bytes", user({"name": "n", "type": "string"}), user({"name": "n", "type": "bytes"}),
     {"BACKWARD", "FORWARD", "FULL", "NONE"}),
    ("add an enum symbol", user({"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A"]}}),
     user({"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A", "B"]}}), {"BACKWARD", "NONE"}),
    ("add an enum symbol to an enum with a default",
     user({"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A", "Z"], "default": "Z"}}),
     user({"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A", "B", "Z"], "default": "Z"}}),
     {"BACKWARD", "FORWARD", "FULL", "NONE"}),
    ("add a union branch", user({"name": "n", "type": ["null", "int"]}),
     user({"name": "n", "type": ["null", "int", "string"]}), {"BACKWARD", "NONE"}),
    ("make a field optional", user({"name": "n", "type": "int"}), user({"name": "n", "type": ["null", "int"]}),
     {"BACKWARD", "NONE"}),
    ("rename the record", user(), parse("AVRO", json.dumps({"type": "record", "name": "Person", "namespace":
                                                             "com.example", "fields": [{"name": "id",
                                                                                        "type": "long"}]})),
     {"NONE"}),
]


@pytest.mark.parametrize("old, new, allowed", [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
@pytest.mark.parametrize("level", ["BACKWARD", "FORWARD", "FULL", "NONE"])
def test_each_level_lets_through_the_changes_confluent_documents(level, old, new, allowed):
    assert (check(level, new, [old]) == []) == (level in allowed)


def test_backward_reasons_name_the_new_schema_as_reader_and_end_with_the_old_schema_and_version():
    reasons = check("BACKWARD", user(EMAIL), [V1], versions=[1])
    assert reasons == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'email' at path '/fields/1' "
        "in the new schema has no default value and is missing in the old schema', additionalInfo:'email'}",
        "{oldSchemaVersion: 1}",
        "{oldSchema: '" + V1.text + "'}"]


def test_forward_reasons_name_the_old_schema_as_reader():
    reasons = check("FORWARD", V1, [user(EMAIL)])
    assert "The field 'email' at path '/fields/1' in the old schema has no default value and is missing in " \
           "the new schema" in reasons[0]
    assert reasons[-1] == "{oldSchema: '" + user(EMAIL).text + "'}"


def test_full_gives_the_reasons_of_both_directions():
    old, new = user({"name": "a", "type": "int"}), user({"name": "b", "type": "int"})
    reasons = check("FULL", new, [old])
    assert "The field 'a' at path '/fields/1' in the old schema" in reasons[0]
    assert "The field 'b' at path '/fields/1' in the new schema" in reasons[1]
    assert reasons[2] == "{oldSchema: '" + old.text + "'}"


# -- which versions are compared --------------------------------------------------------------------------

# Each version follows the one before under the plain level, but not the first version: the transitive
# level sees it.
HISTORIES = {
    # v3 reads v2's data (email is there) but not v1's (email has no default there)
    "BACKWARD": [user(), user(EMAIL_WITH_DEFAULT), user(EMAIL)],
    # v2 reads v3's data (email has a default), v1 does not (it has no default)
    "FORWARD": [user(EMAIL), user(EMAIL_WITH_DEFAULT), user()],
    "FULL": [user(EMAIL), user(EMAIL_WITH_DEFAULT), user()],
}


@pytest.mark.parametrize("level", ["BACKWARD", "FORWARD", "FULL"])
def test_a_plain_level_compares_with_the_latest_version_only_and_a_transitive_one_with_all(level):
    *existing, new = HISTORIES[level]
    assert check(level, new, existing) == []
    reasons = check(f"{level}_TRANSITIVE", new, existing, versions=[1, 2])
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in reasons[0]
    # as in Confluent's answers, the old version is named after the reasons the new schema reads by
    assert ("{oldSchemaVersion: 1}" in reasons) == (level != "FULL")


def test_a_transitive_level_reports_the_newest_version_that_breaks():
    existing = [user(), user({"name": "n", "type": "int"})]
    reasons = check("BACKWARD_TRANSITIVE", user({"name": "m", "type": "int"}), existing, versions=[1, 2])
    assert "{oldSchemaVersion: 2}" in reasons and "{oldSchemaVersion: 1}" not in reasons


def test_none_lets_anything_through():
    assert check("NONE", parse("JSON", '{"type": "string"}'), [V1]) == []


def test_a_schema_of_another_type_is_incompatible():
    assert check("BACKWARD", parse("JSON", '{"type": "string"}'), [V1]) == [
        "Incompatible because of different schema type"]


class Words:
    """A schema type of words: a reader reads what a writer wrote when it knows all the writer's words."""

    schema_type = "WORDS"

    def __init__(self, *words):
        self.words, self.text = set(words), " ".join(words)
        self.identity = self.text

    def reader_problems(self, writer):
        return [f"the reader schema lacks '{w}' of the writer schema" for w in sorted(writer.words - self.words)]


def test_the_levels_work_for_any_schema_type_through_its_reader_problems():
    assert check("BACKWARD", Words("a", "b"), [Words("a")]) == []
    assert check("FORWARD", Words("a", "b"), [Words("a")]) == [
        "the old schema lacks 'b' of the new schema", "{oldSchema: 'a'}"]
    assert check("FULL_TRANSITIVE", Words("a"), [Words("a", "b"), Words("a")], versions=[1, 2]) == [
        "the new schema lacks 'b' of the old schema", "{oldSchemaVersion: 1}", "{oldSchema: 'a b'}"]
