"""Scraping a test broker's Prometheus endpoint, and reading the text format back."""

from __future__ import annotations

import re
import urllib.request

from mmlog.testing import wait as waiting

_LISTENING = re.compile(r"msg=metrics listening=(?P<host>\S+):(?P<port>\d+)")
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics_address(broker) -> tuple[str, int]:
    for line in broker.log_lines:
        m = _LISTENING.search(line)
        if m:
            return m["host"], int(m["port"])
    raise AssertionError("the broker logged no metrics address")


def scrape_text(broker, path: str = "/metrics") -> str:
    host, port = metrics_address(broker)
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return answer.read().decode()


class Scrape:
    """One scrape: samples by (name, labels), and each family's declared type."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.types: dict[str, str] = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                self.types[name] = kind
            elif line and not line.startswith("#"):
                m = _SAMPLE.match(line)
                assert m, f"not a sample line: {line!r}"
                labels = frozenset(_LABEL.findall(m["labels"] or ""))
                self.samples[(m["name"], labels)] = float(m["value"])

    def get(self, name: str, default: float | None = 0.0, **labels) -> float | None:
        return self.samples.get((name, frozenset((k, str(v)) for k, v in labels.items())), default)

    def series(self, name: str) -> dict[frozenset, float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}


def scrape(broker) -> Scrape:
    return Scrape(scrape_text(broker))


def wait_for(broker, check, timeout: float = 30.0) -> Scrape:
    """Scrape until check(scrape) holds; the last scrape (AssertionError showing it if it never did)."""
    last = []

    def checked():
        last[:] = [scrape(broker)]
        return last[0] if check(last[0]) else None

    return waiting.wait_for(checked, timeout, "the scrape to show it", interval=0.1,
                            show=lambda: last[0].text[:3000] if last else None)


METRICS_ON = {"metrics.listen": "127.0.0.1:0"}  # a broker config whose metrics endpoint the tests can scrape


def processors_caught_up(broker, timeout: float = 30.0) -> None:
    """Wait until every processor has run a whole check of the catalogue (topic configs, quotas, ACLs,
    replication throttle) begun after this call: a change the broker answered before it is then in force
    on every processor. Counted by the processors (mmlog_processor_catalogue_checks): two more checks
    each, since the first may have begun before the call. The broker needs METRICS_ON."""
    def checks() -> dict:
        return scrape(broker).series("mmlog_processor_catalogue_checks")

    before = checks()
    assert before, "no mmlog_processor_catalogue_checks: is the broker's metrics endpoint on (METRICS_ON)?"
    waiting.wait_for(lambda: all(checks().get(p, 0) >= n + 2 for p, n in before.items()), timeout,
                     "two catalogue checks on every processor", show=lambda: (before, checks()))
