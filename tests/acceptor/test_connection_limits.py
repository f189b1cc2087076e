"""max.connections, max.connections.per.ip and its overrides: a connection over a limit is closed as soon as it
is accepted; counts drop when connections close, or when the processor holding them dies."""

import os
import signal

import pytest

from mmlog.client.connection import BrokerConnection, ConnectionClosed
from mmlog.errors import KafkaError
from mmlog.protocol.messages import api_versions
from mmlog.testing import EmbeddedBroker
from mmlog.testing.wait import wait_for


def talk(broker) -> BrokerConnection:
    """A connection that the broker answered (ApiVersions); ConnectionClosed if it refused it."""
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout=10)
    try:
        conn.request(api_versions.API_KEY, 3, api_versions.REQUEST(client_software_name="t",
                                                                  client_software_version="1"))
    except BaseException:
        conn.close()
        raise
    return conn


def refused(broker) -> bool:
    try:
        talk(broker).close()
        return False
    except ConnectionClosed:
        return True


def eventually_accepted(broker, timeout=30) -> BrokerConnection:
    """Counts drop when the processor notices the close: retry until it has."""
    return wait_for(lambda: talk(broker), timeout, "the broker to count the close", retry=(ConnectionClosed,))


@pytest.fixture
def conns():
    opened = []
    yield opened
    for conn in opened:
        conn.close()


def test_a_client_over_its_per_ip_limit_is_closed_at_once(tmp_path, conns):
    with EmbeddedBroker(tmp_path / "data", config={"max.connections.per.ip": 3}) as broker:
        conns += [talk(broker) for _ in range(3)]
        assert refused(broker)  # closed on accept: talk() would time out on a connection left open
        wait_for(lambda: any("refused a connection from 127.0.0.1" in line for line in broker.log_lines),
                 what="the refusal logged")
        conns.pop().close()
        conns.append(eventually_accepted(broker))  # the count dropped with the close
        assert refused(broker)


def test_max_connections_caps_the_whole_broker(tmp_path, conns):
    with EmbeddedBroker(tmp_path / "data", processors=2, config={"max.connections": 4}) as broker:
        conns += [talk(broker) for _ in range(4)]  # over both processors
        assert refused(broker)
        for conn in conns[:2]:
            conn.close()
        del conns[:2]
        conns += [eventually_accepted(broker), eventually_accepted(broker)]
        assert refused(broker)


def test_overrides_raise_or_lower_the_limit_for_named_hosts(tmp_path, conns):
    config = {"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "127.0.0.1:3,[::1]:9"}
    with EmbeddedBroker(tmp_path / "data", config=config) as broker:
        conns += [talk(broker) for _ in range(3)]
        assert refused(broker)
    config = {"max.connections.per.ip": 5, "max.connections.per.ip.overrides": "localhost:2"}  # a name, resolved at start
    with EmbeddedBroker(tmp_path / "data2", config=config) as broker:
        conns += [talk(broker) for _ in range(2)]
        assert refused(broker)


def test_connections_of_a_processor_that_died_stop_counting(tmp_path, conns):
    with EmbeddedBroker(tmp_path / "data", processors=1, config={"max.connections": 2}) as broker:
        conns += [talk(broker) for _ in range(2)]
        assert refused(broker)
        (victim,) = broker.processor_pids()
        os.kill(victim, signal.SIGKILL)  # it reports nothing: the supervisor frees its tickets when it reaps it
        conns.append(eventually_accepted(broker, timeout=30))  # the replacement processor serves it
        for conn in conns[:2]:
            with pytest.raises((ConnectionClosed, KafkaError, OSError)):
                conn.request(api_versions.API_KEY, 3, api_versions.REQUEST(client_software_name="t",
                                                                          client_software_version="1"))


def test_a_per_ip_limit_set_dynamically_applies_to_the_next_accept(tmp_path, conns):
    from mmlog.client.admin import Admin

    with EmbeddedBroker(tmp_path / "data") as broker:
        with Admin(broker.bootstrap) as admin:
            admin.alter_broker_config(0, set={"max.connections.per.ip": "3"})  # config/dynamic.py
            conns += [talk(broker) for _ in range(2)]  # with the admin's own: 3
            assert refused(broker)
            admin.alter_broker_config(0, delete=["max.connections.per.ip"])
            conns.append(talk(broker))


def test_a_burst_of_connects_larger_than_the_processors_can_take_at_once_is_served_whole(tmp_path):
    """3,000 connects at once, each with a request already sent: when every processor's hand-off queue is full
    the acceptor waits for room (the rest wait in the listen backlog) instead of closing connections."""
    import socket

    from mmlog.protocol import RequestHeader, encode_request

    frame = bytes(encode_request(RequestHeader(api_versions.API_KEY, 3, 1, "burst"),
                                 api_versions.REQUEST(client_software_name="t", client_software_version="1")))
    with EmbeddedBroker(tmp_path) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        socks = []
        try:
            for _ in range(3000):
                sock = socket.create_connection((host, int(port)), timeout=30)
                sock.sendall(frame)
                socks.append(sock)
            answered = sum(1 for sock in socks if len(sock.recv(4)) == 4)
        finally:
            for sock in socks:
                sock.close()
        assert answered == 3000
