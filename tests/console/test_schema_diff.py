"""Two schema versions side by side: pretty-printed, and a line diff aligning what stayed."""

from __future__ import annotations

from mmlog.console.schemas import pretty, side_by_side


def test_json_schemas_are_indented_and_protobuf_left_as_written():
    assert pretty("AVRO", '{"type":"string"}') == '{\n  "type": "string"\n}'
    assert pretty("PROTOBUF", 'syntax = "proto3";') == 'syntax = "proto3";'


def test_the_diff_pairs_unchanged_lines_and_marks_the_added_and_changed():
    rows = side_by_side("a\nb\nc", "a\nB\nc\nd")
    assert [r["op"] for r in rows] == ["equal", "replace", "equal", "insert"]
    assert rows[1] == {"op": "replace", "left": [2, "b"], "right": [2, "B"]}
    assert rows[3] == {"op": "insert", "left": None, "right": [4, "d"]}
