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
from mmlog.testing.network import ZK, Network, broker_user, skip_unless_root

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
