"""connections.max.idle.ms: a connection with no traffic for that long is closed, whatever it holds; one that
keeps talking, or waits on a long poll, is not."""

import struct
import time

from mmlog.protocol.messages import api_versions, metadata
from mmlog.testing import EmbeddedBroker
from mmlog.testing.connections import connect, fetch_one
from tests.processors.test_request_memory import MiB, open_socket, still_open
from mmlog.testing.wait import wait_for

IDLE_MS = 1000


def test_idle_connections_are_closed_and_busy_ones_are_not(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config={"connections.max.idle.ms": IDLE_MS}) as broker:
        silent = open_socket(broker)  # never sends a byte
        partial = open_socket(broker)
        partial.sendall(struct.pack(">i", 100 * MiB) + b"x" * 3000)  # a frame begun and abandoned
        with connect(broker) as talker:
            talker.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "idle"}],
                                                                allow_auto_topic_creation=True))
            def talk():  # a request every half second: never idle for 1 s, and answered every time
                talker.request(api_versions.API_KEY, 3, api_versions.REQUEST(
                    client_software_name="t", client_software_version="1"))
                return not still_open(silent) and not still_open(partial)

            wait_for(talk, interval=0.5, retry=(), what="the silent sockets closed while the talker is kept")


def test_a_long_poll_longer_than_the_idle_time_keeps_its_connection(tmp_path):
    """Parked, the connection is busy; answered, it has just been active: a consumer that polls again a little
    later finds it open (were only requests activity, it would be closed within a second of the answer)."""
    idle_ms = 2000
    with EmbeddedBroker(tmp_path / "data", config={"connections.max.idle.ms": idle_ms}) as broker:
        with connect(broker) as consumer:
            consumer.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "idle"}],
                                                                  allow_auto_topic_creation=True))
            for _ in range(2):
                assert fetch_one(consumer, "idle", 0, 0, max_wait_ms=int(idle_ms * 1.5)).error_code == 0
                time.sleep(idle_ms / 1000 * 0.75)  # the reaper runs once a second: it looks at least once
            assert still_open(consumer.sock)
            consumer.sock.setblocking(True)
            consumer.request(api_versions.API_KEY, 3, api_versions.REQUEST(
                client_software_name="t", client_software_version="1"))


def test_an_idle_connection_is_closed(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config={"connections.max.idle.ms": IDLE_MS}) as broker:
        sock = open_socket(broker)
        wait_for(lambda: not still_open(sock), what="the idle connection closed")
