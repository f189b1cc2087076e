"""Running under systemd: READY=1 on $NOTIFY_SOCKET once serving; the unit and sample config are valid."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from mmlog.config.broker import BrokerConfig

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def test_the_broker_notifies_systemd_when_ready_and_when_stopping(tmp_path):
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(address)
        notify.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=address)
        proc = subprocess.Popen([sys.executable, "-m", "mmlog", "broker", "--data-dir", str(tmp_path / "d"),
                                 "--listen", "127.0.0.1:0", "--processors", "1"], env=env,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            assert notify.recv(64) == b"READY=1"
            proc.send_signal(signal.SIGTERM)
            assert notify.recv(64) == b"STOPPING=1"
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_the_sample_config_loads_and_the_unit_is_hardened():
    config = BrokerConfig.load(TOOLS / "server.properties")
    assert config["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert config["log.retention.ms"] == 168 * 3600 * 1000
    unit = (TOOLS / "systemd" / "mmlog.service").read_text()
    for line in ["Type=notify", "Restart=on-failure", "WatchdogSec=", "User=mmlog", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ReadWritePaths=/var/lib/mmlog", "LimitNOFILE="]:
        assert line in unit
    assert "--config /etc/mmlog/server.properties" in unit
