"""Prometheus' text exposition format (version 0.0.4): families of samples to bytes.

    # HELP <name> <doc>
    # TYPE <name> counter|gauge|histogram
    <name>{label="value",...} <number>

A histogram family writes `<name>_bucket{le=...}` (cumulative), `<name>_sum` and
`<name>_count`; a counter's samples end in `_total`. Label values escape backslash,
double quote and newline, as the format requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Family:
    """One metric family: its samples as (suffix, labels, value)."""

    name: str
    kind: str  # counter, gauge or histogram
    doc: str
    samples: list[tuple[str, dict, float]] = field(default_factory=list)

    def add(self, value: float, **labels) -> None:
        self.samples.append(("_total" if self.kind == "counter" else "", labels, value))

    def add_histogram(self, bounds: tuple[float, ...], buckets, total: float, **labels) -> None:
        """Non-cumulative bucket counts (one per bound, then +Inf) and the sum of the observed values."""
        running = 0
        for bound, count in zip((*bounds, float("inf")), buckets):
            running += int(count)
            self.samples.append(("_bucket", {**labels, "le": _number(bound)}, running))
        self.samples.append(("_sum", labels, total))
        self.samples.append(("_count", labels, running))


def render(families: list[Family]) -> bytes:
    out = []
    for family in families:
        out.append(f"# HELP {family.name} {family.doc}")
        out.append(f"# TYPE {family.name} {family.kind}")
        for suffix, labels, value in family.samples:
            out.append(f"{family.name}{suffix}{_labels(labels)} {_number(value)}")
    out.append("")
    return "\n".join(out).encode()


def _labels(labels: dict) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    return str(int(value))
