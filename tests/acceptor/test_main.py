"""Booting a broker: the descriptor budget is raised to the hard limit and logged."""

from __future__ import annotations

import resource
import subprocess
import sys

from mmlog.testing import EmbeddedBroker


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    out = subprocess.run([sys.executable, "-c", f"""
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, ({low}, {hard}))
from mmlog.acceptor.main import raise_descriptor_limit
print(raise_descriptor_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))
"""], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    expected_after = low if hard == resource.RLIM_INFINITY else hard
    assert out == f"({low}, {expected_after}) ({expected_after}, {hard})"


def test_a_broker_logs_its_descriptor_budget(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as broker:
        assert any("msg=descriptors: limit" in line for line in broker.log_lines)
