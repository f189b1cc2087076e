import pytest

from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker with two processors shared by a module's tests (its metrics on, for what they show)."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config=METRICS_ON) as b:
        yield b
