"""The text exposition format: counters end in _total, histograms are cumulative, label values are escaped."""

from mmlog.metrics.exposition import Family, render
from mmlog.metrics.families import error_name


def test_a_counter_a_gauge_and_a_histogram_in_the_text_format():
    counter = Family("c", "counter", "A counter.")
    counter.add(3, request="Produce")
    gauge = Family("g", "gauge", "A gauge.")
    gauge.add(0.25)
    histogram = Family("h", "histogram", "A histogram.")
    histogram.add_histogram((0.5, 1.0), [1, 0, 2], 7.5, request="Fetch")
    assert render([counter, gauge, histogram]).decode().splitlines() == [
        "# HELP c A counter.", "# TYPE c counter", 'c_total{request="Produce"} 3',
        "# HELP g A gauge.", "# TYPE g gauge", "g 0.25",
        "# HELP h A histogram.", "# TYPE h histogram",
        'h_bucket{request="Fetch",le="0.5"} 1', 'h_bucket{request="Fetch",le="1"} 1',
        'h_bucket{request="Fetch",le="+Inf"} 3', 'h_sum{request="Fetch"} 7.5', 'h_count{request="Fetch"} 3',
    ]


def test_label_values_are_escaped():
    family = Family("g", "gauge", "x")
    family.add(1, topic='a"b\\c\nd')
    assert render([family]).decode().splitlines()[-1] == 'g{topic="a\\"b\\\\c\\nd"} 1'


def test_error_names_are_kafkas():
    assert [error_name(c) for c in (-1, 3, 6, 87)] == [
        "UNKNOWN_SERVER_ERROR", "UNKNOWN_TOPIC_OR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "INVALID_RECORD"]
