"""Scraping a test broker's Prometheus endpoint, and reading the text format back."""

from __future__ import annotations

import re
import time
import urllib.request

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


def wait_for(broker, check, timeout: float = 10.0) -> Scrape:
    """Scrape until check(scrape) holds; the last scrape (AssertionError if it never did)."""
    deadline = time.monotonic() + timeout
    while True:
        s = scrape(broker)
        if check(s):
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {timeout} s; last scrape:\n{s.text[:3000]}")
        time.sleep(0.1)
