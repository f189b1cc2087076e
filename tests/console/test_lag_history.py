"""The lag history keeps the last hour of each group, a point at most a second, and a bounded set of groups."""

from __future__ import annotations

from mmlog.console.lag_history import LagHistory


def test_points_older_than_the_window_are_dropped_and_close_ones_merge():
    history = LagHistory(window_s=60)
    history.record("g", 10, now=1000.0)
    history.record("g", 8, now=1000.5)  # within a second: replaces the last value
    history.record("g", 5, now=1030.0)
    assert history.series("g", now=1030.0) == [(1000.0, 8), (1030.0, 5)]
    history.record("g", 1, now=1070.0)
    assert history.series("g", now=1070.0) == [(1030.0, 5), (1070.0, 1)]


def test_the_least_recently_sampled_group_is_forgotten_past_the_limit():
    history = LagHistory(max_groups=2)
    history.record("a", 1, now=1.0)
    history.record("b", 1, now=2.0)
    history.record("a", 2, now=3.0)
    history.record("c", 1, now=4.0)
    assert sorted(history.groups()) == ["a", "c"]
    assert history.series("b", now=4.0) == []
