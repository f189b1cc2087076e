import shutil

import pytest

from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker (two processors) shared by the tests of a module."""
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed (.ci/run installs it)")
    return path
