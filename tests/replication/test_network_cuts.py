"""The partition harness itself: nftables drops a user's loopback packets by owner and port, both ways.

`meta skuid` in an output chain is what every partition test builds on; this checks it on this machine
with a root-owned server and clients run as two broker users, without any broker.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from types import SimpleNamespace

from mmlog.testing import as_user
from mmlog.testing.network import ZK, Network, broker_user, owned_name, skip_unless_root

# Connects to argv[1], sends a line, prints what comes back or "cut" if nothing does within a second.
CLIENT = ("import socket, sys\n"
          "try:\n"
          "    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=1)\n"
          "    s.sendall(b'ping\\n'); print(s.recv(16).decode().strip())\n"
          "except OSError:\n"
          "    print('cut')\n")


def echo_server() -> socket.socket:
    """A root-owned echo server on a free loopback port (a stand-in for ZooKeeper)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(conn.recv(16))

    threading.Thread(target=serve, daemon=True).start()
    return server


def reply_as(user: str, port: int) -> str:
    return subprocess.run(as_user(user, [sys.executable, "-c", CLIENT, str(port)]), capture_output=True,
                          text=True, timeout=30).stdout.strip()


def test_a_cut_drops_only_that_users_packets_to_that_port_until_healed():
    skip_unless_root()
    users = {i: broker_user(i) for i in (1, 2)}
    with echo_server() as server:
        port = server.getsockname()[1]
        brokers = [SimpleNamespace(broker_id=i, user=u, listener_ports={}, port=40000 + i) for i, u in users.items()]
        with Network(port, brokers) as net:
            assert reply_as(users[1], port) == "ping"
            net.cut((1, ZK))
            assert reply_as(users[1], port) == "cut"
            assert reply_as(users[2], port) == "ping"  # another user's sockets pass
            net.heal()
            assert reply_as(users[1], port) == "ping"
        listed = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        assert net.table not in listed  # deleted on leaving


def tables() -> set[str]:
    listed = subprocess.run(["nft", "list", "tables", "inet"], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in listed.splitlines()}


def test_a_network_deletes_the_tables_that_killed_runs_left_and_keeps_those_of_live_processes():
    skip_unless_root()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    kept, orphan = owned_name("mmlog_test_", live.pid), owned_name("mmlog_test_", gone.pid)
    gone.kill()
    gone.wait()
    left = {kept, orphan, f"mmlog_test_{gone.pid}", f"mmlog_probe_{live.pid}_1", "mmlog_test_other"}
    try:
        for name in left:  # a killed run's table, an older run's (pid alone), one whose pid was reused
            subprocess.run(["nft", "add", "table", "inet", name], check=True)
        with echo_server() as server:
            with Network(server.getsockname()[1], []) as net:
                assert net.table in tables()
                assert tables() & left == {kept, "mmlog_test_other"}  # not a pid: not ours to judge
            assert net.table not in tables()
    finally:
        live.kill()
        live.wait()
        for name in left & tables():
            subprocess.run(["nft", "delete", "table", "inet", name])
