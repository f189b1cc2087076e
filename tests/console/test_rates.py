"""Every topic's messages in per second, sampled in the background: known before anyone views the topic."""

from __future__ import annotations

import time

import pytest

from mmlog.client import Producer
from mmlog.client.admin import Admin
from mmlog.console.rates import Rates, RateSampler
from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("rates"), processors=1) as b:
        yield b


def test_a_sampler_round_gives_every_topic_its_rate(broker):
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("busy", 3)
        admin.create_topic("idle", 1)
    rates = Rates()
    sampler = RateSampler(lambda: Admin(broker.bootstrap), rates)
    try:
        sampler.tick()
        assert rates.rate("busy") is None  # one sample: no rate yet
        with Producer(broker.bootstrap) as producer:
            for i in range(300):
                producer.send("busy", b"x", partition=i % 3)
        time.sleep(1.1)  # MIN_GAP_S apart
        sampler.tick()
    finally:
        sampler.stop()
    assert rates.rate("busy") > 0 and rates.rate("idle") == 0
    assert len(rates.history("busy")) == 1
