"""The broker's HTTP server: its listeners bound at start-up like the Kafka ones, held by the main process
alone, watched like its other essential threads, and off unless schema.registry.listeners is set."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from mmlog.config.broker import parse_registry_listeners
from mmlog.testing import EmbeddedBroker
from tests.registry.conftest import REGISTRY_ON, call


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` holds a listening socket on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_the_listeners_belong_to_the_main_process_alone(tmp_path):
    config = {**REGISTRY_ON, "schema.registry.listeners": "http://127.0.0.1:0,http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path / "data", processors=2, config=config) as broker:
        ports = {port_of(u) for u in broker.registry_urls}
        assert len(ports) == 2 and ports <= listening_ports(broker.pid)
        for child in broker.processor_pids() + [broker.cleaner_pid()]:
            assert not ports & listening_ports(child), f"child {child} holds a registry listener"
        for url in broker.registry_urls:
            assert call(url, "GET", "/") == (200, {})
        assert broker.stop() == 0
    assert any("msg=stopped exit=0" in line for line in broker.log_lines)


def test_off_by_default(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1) as broker:
        assert broker.registry_urls == []
        assert not any("schema registry" in line for line in broker.log_lines)


def broker_command(tmp_path, *more) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmlog", "broker", "--data-dir", str(tmp_path / "data"),
                           "--listen", "127.0.0.1:0", "--processors", "1", *more],
                          check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_a_registry_port_in_use_stops_the_broker_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = broker_command(tmp_path, "--override", f"schema.registry.listeners=http://127.0.0.1:{port}")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"mmlog: error: cannot listen on http://127.0.0.1:{port}: Address already in use")


@pytest.mark.parametrize("value", ["127.0.0.1:8081", "ftp://127.0.0.1:1", "http://127.0.0.1:99999", "http://h"])
def test_a_bad_listener_is_refused_in_one_line(tmp_path, value):
    done = broker_command(tmp_path, "--override", f"schema.registry.listeners={value}")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"mmlog: error: ConfigError: schema.registry.listeners: {value!r} is invalid (http[s]://HOST:PORT list)"]


def test_https_needs_a_keystore(tmp_path):
    done = broker_command(tmp_path, "--override", "schema.registry.listeners=https://127.0.0.1:0")
    assert done.returncode == 1
    assert "https listener needs ssl.keystore.location" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("value, parsed", [
    ("", []), ("http://127.0.0.1:8081", [("http", "127.0.0.1", 8081)]),
    ("https://[::1]:0, http://:80", [("https", "::1", 0), ("http", "0.0.0.0", 80)])])
def test_listener_values(value, parsed):
    assert parse_registry_listeners(value) == parsed
