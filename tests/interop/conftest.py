import shutil

import pytest

from mmlog.testing import EmbeddedBroker
from mmlog.testing.scrape import METRICS_ON


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker (two processors) shared by the tests of a module."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2, config=METRICS_ON) as b:
        yield b


def require(tool: str) -> str:
    """The path of a client binary pip cannot install; the test is skipped, with the reason in
    pytest's summary, where it is missing (.ci/run installs it, so CI runs the test)."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (`apt-get install -y {tool}`; .ci/run installs it)")
    return path
