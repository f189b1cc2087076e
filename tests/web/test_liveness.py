"""The web server's thread and the registry's reader are essential threads of the main process: one that
dies stops the broker with one line (exit code 1), like the control thread."""

from __future__ import annotations

import pytest

from mmlog.acceptor.liveness import FAULT_INJECTION_ENV
from mmlog.testing import EmbeddedBroker
from tests.acceptor.test_liveness import exit_code, fatal_line, inject
from tests.registry.conftest import REGISTRY_ON


@pytest.fixture(autouse=True)
def fault_injection(monkeypatch):
    monkeypatch.setenv(FAULT_INJECTION_ENV, "1")


@pytest.mark.parametrize("thread", ["web", "registry-reader"])
def test_a_dead_web_or_reader_thread_stops_the_broker(tmp_path, thread):
    with EmbeddedBroker(tmp_path, processors=1, config=REGISTRY_ON) as broker:
        inject(broker, thread)
        assert exit_code(broker) == 1
        assert f"thread {thread} died: InjectedFault" in fatal_line(broker)
