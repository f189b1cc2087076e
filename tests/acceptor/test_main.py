"""Booting a broker: the descriptor budget is raised to the hard limit and logged; a codec cache it cannot use
is no obstacle. Idle, its control thread sleeps until its timers are due."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmlog.ipc.control_channel import THREAD_NAME
from mmlog.protocol.code_cache import ENV, cache_file, load
from mmlog.testing import EmbeddedBroker
from tests.interop.conftest import require


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


@pytest.mark.parametrize("cache", ["unwritable", "corrupt"])
def test_a_broker_whose_codec_cache_is_unwritable_or_corrupt_starts_and_answers_kcat(tmp_path, monkeypatch, cache):
    kcat = require("kcat")
    if cache == "unwritable":
        (tmp_path / "a-file").write_text("")
        directory = tmp_path / "a-file" / "cache"  # mkdir fails, as in a read-only install
    else:
        directory = tmp_path / "cache"
        directory.mkdir(mode=0o700)
        cache_file(directory).write_bytes(b"mmlogcc1" + b"\x00" * 40)
    monkeypatch.setenv(ENV, str(directory))
    with EmbeddedBroker(tmp_path / "data") as broker:
        subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", "codecs", "-K:"], input="k:v\n", text=True,
                       check=True, timeout=60)
        out = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", "codecs", "-o", "beginning", "-e",
                              "-f", "%k=%s\\n"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == ["k=v"]
    assert (len(load(cache_file(directory))) > 0) == (cache == "corrupt")  # the broker rewrote the corrupt file


def test_an_idle_brokers_control_thread_wakes_for_its_timers_not_for_polls(tmp_path):
    """The control thread wakes for its timers (the flush check each second, its liveness turn), not to poll
    state that says when it changes: the transaction coordinator's partitions come with their roles (it polled
    them ten times a second, and the thread turned 12 times a second)."""
    with EmbeddedBroker(tmp_path / "data", processors=1) as broker:
        [tid] = [t for t in os.listdir(f"/proc/{broker.pid}/task")
                 if Path(f"/proc/{broker.pid}/task/{t}/comm").read_text().strip() == THREAD_NAME]
        time.sleep(1)  # past the start's own work
        before, started = thread_turns(broker.pid, tid), time.monotonic()
        time.sleep(4)
        per_second = (thread_turns(broker.pid, tid) - before) / (time.monotonic() - started)
    assert per_second < 8, f"{per_second:.1f} turns a second while idle"


def thread_turns(pid: int, tid: str) -> int:
    """How many times the thread has been put on a CPU (the third field of its schedstat)."""
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[2])
