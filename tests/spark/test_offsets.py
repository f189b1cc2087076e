"""Offset specs, ranges and rate limits, and the options parser: plain functions, no Spark session."""

from __future__ import annotations

import pytest

from mmlog.client.records import TopicPartition as TP
from mmlog.spark.offsets import (EARLIEST, LATEST, OffsetRange, from_json, parse_spec, pick, rate_limit,
                                 split_ranges, to_json)
from mmlog.spark.options import DEFAULT_MAX_RECORDS, ReadOptions, WriteOptions

BOTH = (EARLIEST, LATEST)


@pytest.mark.parametrize("text, spec", [
    (None, "earliest"),
    ("LATEST", "latest"),
    ('{"a": {"0": 5, "2": -2}, "b": {"1": -1}}', {"a": {0: 5, 2: EARLIEST}, "b": {1: LATEST}}),
])
def test_specs_parse(text, spec):
    assert parse_spec("startingOffsets", text, default="earliest", allowed=BOTH) == spec


@pytest.mark.parametrize("text, allowed, message", [
    ("latest", (EARLIEST,), "'latest' is not allowed"),
    ('{"a": {"0": -1}}', (EARLIEST,), "bad offset -1"),
    ('{"a": {"x": 1}}', BOTH, "bad offset"),
    ('{"a": [1]}', BOTH, "object of partitions"),
    ("[1]", BOTH, "JSON object of topics"),
    ("soon", BOTH, "want earliest, latest or JSON"),
])
def test_bad_specs_name_the_option(text, allowed, message):
    with pytest.raises(ValueError, match=f"startingOffsets: .*{message}"):
        parse_spec("startingOffsets", text, default="earliest", allowed=allowed)


def test_pick_resolves_sentinels_and_defaults():
    spec = {"a": {0: 7, 1: EARLIEST}}
    assert [pick(spec, "latest", TP("a", p), 3, 9) for p in (0, 1, 2)] == [7, 3, 9]
    assert pick("earliest", "latest", TP("b", 0), 3, 9) == 3


def test_ranges_split_evenly_and_to_at_least_min_partitions():
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 5), OffsetRange("a", 2, 0, 3)]
    assert split_ranges(ranges, 4) == [OffsetRange("a", 0, 0, 3), OffsetRange("a", 0, 3, 6),
                                       OffsetRange("a", 0, 6, 10), OffsetRange("a", 2, 0, 3)]
    pieces = split_ranges(ranges, DEFAULT_MAX_RECORDS, min_partitions=6)
    assert len(pieces) >= 6 and sum(r.size for r in pieces) == 13


def test_rate_limit_shares_the_budget_by_backlog():
    start = {TP("a", 0): 0, TP("a", 1): 100, TP("a", 2): 50}
    latest = {TP("a", 0): 900, TP("a", 1): 200, TP("a", 2): 50, TP("b", 0): 0}
    assert rate_limit(start, latest, 100) == {TP("a", 0): 90, TP("a", 1): 110, TP("a", 2): 50, TP("b", 0): 0}
    assert rate_limit(start, latest, 10_000) == latest
    assert rate_limit({TP("a", 0): 0, TP("a", 1): 0}, {TP("a", 0): 1, TP("a", 1): 1000}, 10)[TP("a", 0)] == 1


def test_json_offsets_round_trip():
    offsets = {TP("b", 1): 5, TP("a", 10): 2, TP("a", 2): 0}
    assert to_json(offsets) == {"a": {"2": 0, "10": 2}, "b": {"1": 5}}
    assert from_json(to_json(offsets)) == offsets


def test_read_options_defaults_and_aliases():
    batch = ReadOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a, b,a"}, streaming=False)
    assert batch.topics == ("a", "b") and batch.starting == "earliest" and batch.ending == "latest"
    stream = ReadOptions.parse({"bootstrap": "127.0.0.1:1", "subscribepattern": "a.*",
                                "maxoffsetspertrigger": "10", "includeheaders": "TRUE"}, streaming=True)
    assert stream.starting == "latest" and stream.max_offsets_per_trigger == 10 and stream.include_headers
    assert WriteOptions.parse({"bootstrap": "h:1", "topic": "t"}).topic == "t"


@pytest.mark.parametrize("options, streaming, message", [
    ({"subscribe": "a"}, False, "option bootstrap is required"),
    ({"bootstrap": "nohost", "subscribe": "a"}, False, "option bootstrap: bad bootstrap address"),
    ({"bootstrap": "h:1"}, False, "exactly one of the options subscribe and subscribePattern"),
    ({"bootstrap": "h:1", "subscribe": "a", "subscribePattern": "b"}, False, "exactly one"),
    ({"bootstrap": "h:1", "subscribePattern": "("}, False, "option subscribePattern"),
    ({"bootstrap": "h:1", "subscribe": "a", "kafka.bootstrap.servers": "h:2"}, False, "mean the same"),
    ({"bootstrap": "h:1", "subscribe": "a", "minPartitions": "0"}, False, "option minPartitions: want an integer"),
    ({"bootstrap": "h:1", "subscribe": "a", "includeHeaders": "yes"}, False, "option includeHeaders: want true"),
    ({"bootstrap": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "5"}, False, "maxOffsetsPerTrigger: for stream"),
    ({"bootstrap": "h:1", "subscribe": "a", "endingOffsets": "latest"}, True, "endingOffsets: not for streaming"),
    ({"bootstrap": "h:1", "subscribe": "a", "startingOffset": "latest"}, True, "unknown option 'startingoffset'"),
    ({"bootstrap": "h:1", "subscribe": "a", "fetchMaxBytes": str(1 << 30)}, True, "fetchMaxBytes: want an integer"),
])
def test_bad_read_options_are_one_line_errors_naming_the_option(options, streaming, message):
    with pytest.raises(ValueError, match=message) as info:
        ReadOptions.parse(options, streaming=streaming)
    assert "\n" not in str(info.value)
