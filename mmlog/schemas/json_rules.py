"""The kinds of difference JSON Schema compatibility finds, which of them a reader can live with, and how
Confluent Schema Registry words each in its verbose answers ("reader" is the new schema under BACKWARD)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

COMPATIBLE = frozenset("""
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
    MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED
    EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED
    MULTIPLE_OF_REMOVED REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
    DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
    MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED ADDITIONAL_PROPERTIES_ADDED
    ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED UNEVALUATED_PROPERTIES_EXTENDED
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED MAX_CONTAINS_INCREASED
    MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED UNIQUE_ITEMS_REMOVED
    ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_EXTENDED
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED
""".split())


def compatible(found) -> bool:
    return all(kind in COMPATIBLE for kind, _ in found)


def under(prefix: tuple, found: list) -> list:
    return [(kind, prefix + path) for kind, path in found]


def number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def bound(original: Node, update: Node, keyword: str, kind: str) -> list:
    """A limit added, removed, increased or decreased (booleans, draft-04's exclusive flags, are not limits)."""
    before, after = number(original.get(keyword)), number(update.get(keyword))
    if before == after:
        return []
    where = (keyword,)
    if before is None:
        return [(f"{kind}_ADDED", where)]
    if after is None:
        return [(f"{kind}_REMOVED", where)]
    return [(f"{kind}_INCREASED" if before < after else f"{kind}_DECREASED", where)]


def multiple_of(before, after) -> list:
    try:
        before = Decimal(str(before)) if number(before) is not None else None
        after = Decimal(str(after)) if number(after) is not None else None
    except InvalidOperation:
        return []
    if before == after:
        return []
    where = ("multipleOf",)
    if before is None:
        return [("MULTIPLE_OF_ADDED", where)]
    if after is None:
        return [("MULTIPLE_OF_REMOVED", where)]
    if before != 0 and after % before == 0:
        return [("MULTIPLE_OF_EXPANDED", where)]
    if after != 0 and before % after == 0:
        return [("MULTIPLE_OF_REDUCED", where)]
    return [("MULTIPLE_OF_CHANGED", where)]


def pattern_matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


# How Confluent words each kind of difference; the reader is the new schema under BACKWARD.
_WORDING = (
    ({"MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED", "MULTIPLE_OF_ADDED",
      "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED", "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED",
      "MIN_PROPERTIES_ADDED", "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED",
      "MIN_ITEMS_ADDED", "MAX_CONTAINS_ADDED", "MIN_CONTAINS_ADDED", "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED",
      "ADDITIONAL_PROPERTIES_REMOVED", "UNEVALUATED_PROPERTIES_REMOVED", "UNEVALUATED_ITEMS_REMOVED"},
     "The keyword at path '{path}' in the reader schema is not present in the writer schema"),
    ({"MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED", "MIN_PROPERTIES_INCREASED",
      "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED", "MIN_CONTAINS_INCREASED"},
     "The value at path '{path}' in the reader schema is more than its value in the writer schema"),
    ({"MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED", "MAX_CONTAINS_DECREASED",
      "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"},
     "The value at path '{path}' in the reader schema is less than its value in the writer schema"),
    ({"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"},
     "The value at path '{path}' is different between the reader schema and the writer schema"),
    ({"ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED", "ADDITIONAL_PROPERTIES_NARROWED",
      "UNEVALUATED_PROPERTIES_NARROWED", "UNEVALUATED_ITEMS_NARROWED"},
     "An array or combined type at path '{path}' has fewer elements in the reader schema than the writer schema"),
    ({"DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"},
     "An array or combined type at path '{path}' has more elements in the reader schema than the writer schema"),
    ({"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
      "ENUM_ARRAY_CHANGED"},
     "A type at path '{path}' is different between the reader schema and the writer schema"),
    ({"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
      "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"},
     "The reader schema has an open content model and has a property or item at path '{path}' which is "
     "missing in the writer schema"),
    ({"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"},
     "The reader schema has an unopen content model and has a required property at path '{path}' which is "
     "missing in the writer schema"),
    ({"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
     "The reader schema has a closed content model and is missing a property or item present at path '{path}' "
     "in the writer schema"),
    ({"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
      "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"},
     "A property or item is missing in the reader schema but present at path '{path}' in the writer schema "
     "and is not covered by its partially open content model"),
    ({"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
      "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"},
     "The reader schema has a property or item at path '{path}' which is missing in the writer schema and is "
     "not covered by its partially open content model"),
)


def describe(kind: str, path: str) -> str:
    text = next((words for kinds, words in _WORDING if kind in kinds), "")
    return f'{{errorType:"{kind}", description:"{text.format(path=path)}\'}}'
