import pytest

from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker with two processors shared by a module's tests."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b
