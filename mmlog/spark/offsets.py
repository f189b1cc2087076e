"""Offsets as Spark's Kafka source spells them, and the offset ranges that become Spark tasks.

A spec (`startingOffsets`, `endingOffsets`) is "earliest", "latest", or JSON naming
offsets per partition, `{"clicks": {"0": 23, "1": -2}}`, with -2 for earliest and -1
for latest; a partition the JSON leaves out takes the option's default. Streaming
offsets (what Spark checkpoints) use the same JSON form with real offsets only.

A range is one partition's offsets [start, end); `split_ranges` cuts long ones so
that no Spark task reads more than `max_records` records (and at least
`min_partitions` tasks exist), and `rate_limit` shares a micro-batch's record
budget among partitions in proportion to their backlog, as Spark's Kafka source
does. Everything here is plain arithmetic; the broker look-ups live in `lookup.py`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Union

from mmlog.client.records import TopicPartition

EARLIEST, LATEST = -2, -1  # ListOffsets' sentinels, and those of Spark's JSON
_WORDS = {"earliest": EARLIEST, "latest": LATEST}

OffsetSpec = Union[str, dict[str, dict[int, int]]]  # "earliest" | "latest" | {topic: {partition: offset}}
Offsets = dict[TopicPartition, int]


def parse_spec(name: str, text: str | None, *, default: str, allowed: tuple[int, ...]) -> OffsetSpec:
    """An offsets option: "earliest", "latest" or JSON; `allowed` lists the sentinels (EARLIEST, LATEST) it
    may use, as Spark allows no "latest" start and no "earliest" end in batch reads."""
    text = default if text is None else text.strip()
    word = text.lower()
    if word in _WORDS:
        if _WORDS[word] not in allowed:
            raise ValueError(f"mmlog option {name}: {word!r} is not allowed here")
        return word
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"mmlog option {name}: want earliest, latest or JSON like "
                         f'{{"topic": {{"0": 42}}}}, got {text!r}') from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"mmlog option {name}: want a JSON object of topics, got {text!r}")
    spec: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"mmlog option {name}: topic {topic!r} wants an object of partitions")
        spec[topic] = {}
        for p, offset in parts.items():
            if not str(p).isdigit() or not isinstance(offset, int) or isinstance(offset, bool) or (
                    offset < 0 and offset not in allowed):
                raise ValueError(f"mmlog option {name}: bad offset {offset!r} for {topic} partition {p!r}")
            spec[topic][int(p)] = offset
    return spec


def pick(spec: OffsetSpec, default: str, tp: TopicPartition, earliest: int, latest: int) -> int:
    """The offset a spec names for one partition, its sentinels resolved with the partition's bounds."""
    if isinstance(spec, dict):
        offset = spec.get(tp.topic, {}).get(tp.partition, _WORDS[default])
    else:
        offset = _WORDS[spec]
    return earliest if offset == EARLIEST else latest if offset == LATEST else offset


def spec_partitions(spec: OffsetSpec) -> set[TopicPartition]:
    """The partitions a JSON spec names (none for "earliest"/"latest")."""
    if not isinstance(spec, dict):
        return set()
    return {TopicPartition(t, p) for t, parts in spec.items() for p in parts}


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list[OffsetRange], max_records: int, min_partitions: int | None = None) -> list[OffsetRange]:
    """Empty ranges dropped; each other cut into equal pieces of at most max_records offsets, and the
    pieces made smaller still, in proportion to their ranges, until there are at least min_partitions."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if min_partitions and total:
        max_records = min(max_records, max(1, total // min_partitions))
    out = []
    for r in ranges:
        pieces = math.ceil(r.size / max_records)
        bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:])]
    return out


def rate_limit(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """End offsets reading at most about max_records in all: each partition gets a share of the budget in
    proportion to its backlog (rounded down, but at least one record), as Spark's Kafka source shares it."""
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        share = max_records * backlog[tp] / total
        take = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start.get(tp, end) + take)
    return out


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} as Spark's JSON offsets: {"topic": {"0": 23}} (string keys, sorted)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: dict) -> Offsets:
    """The inverse of to_json."""
    return {TopicPartition(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}
