"""tools/bench/trees.py: a baseline's tree and this one run in turn, and a case's rounds as one table cell."""

from __future__ import annotations

from tools.bench.trees import in_turn, spread, taking_turns


def test_in_turn_alternates_the_baselines_tree_and_this_one_round_by_round(tmp_path):
    labels, turns = in_turn("HEAD", 3, tmp_path)
    assert set(labels) == {"before", "after"}
    cases = [case for _, case, _ in turns]
    assert cases == ["before", "after", "after", "before", "before", "after"]
    base = {tree for _, case, tree in turns if case == "before"}
    assert len(base) == 1 and (next(iter(base)) / "mmlog" / "__init__.py").exists()
    assert {tree for _, case, tree in turns if case == "after"} == {None}
    labels, turns = in_turn(None, 2, tmp_path)
    assert set(labels) == {"after"} and [(r, c) for r, c, _ in turns] == [(0, "after"), (1, "after")]


def test_a_cell_is_the_median_then_the_range_of_the_rounds():
    assert spread([3.0, 1.0, 2.0], ".1f") == "2.0 (1.0–3.0)"
    assert spread([1500.0, 700000.0], ",.0f") == "350,750 (1,500–700,000)"


def test_taking_turns_keeps_the_baselines_tree_for_the_block_and_removes_it_after():
    with taking_turns("HEAD", 2, "test-trees-") as (labels, turns):
        (base,) = {tree for _, case, tree in turns if case == "before"}
        assert set(labels) == {"before", "after"} and (base / "mmlog" / "__init__.py").exists()
    assert not base.exists()
