"""The processor's epoll set: payloads back with READ/WRITE readiness, as the selectors module reports it."""

from __future__ import annotations

import socket

import pytest

from mmlog.processors.poller import READ, WRITE, Poller


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def poller():
    p = Poller()
    yield p
    p.close()


def test_a_readable_socket_comes_back_with_its_payload_and_read(poller, pair):
    a, b = pair
    poller.register(a, READ, "conn-a")
    assert poller.select(0) == []
    b.send(b"x")
    assert poller.select(0) == [("conn-a", READ)]


def test_modify_changes_the_events_and_the_payload(poller, pair):
    a, _ = pair
    poller.register(a, READ, "first")
    poller.modify(a, WRITE, "second")
    assert poller.select(0) == [("second", WRITE)]


def test_a_hang_up_reads_as_readable_and_writable_so_either_side_meets_it(poller, pair):
    a, b = pair
    poller.register(a, WRITE, "conn")
    b.close()
    assert poller.select(0) == [("conn", READ | WRITE)]


def test_plain_descriptors_register_too(poller, pair):
    a, b = pair
    poller.register(a.fileno(), READ, "fd")
    b.send(b"x")
    assert poller.select(0) == [("fd", READ)]


def test_unregistering_what_is_not_registered_is_a_key_error(poller, pair):
    a, _ = pair
    with pytest.raises(KeyError):
        poller.unregister(a)
    poller.register(a, READ, "conn")
    poller.unregister(a)
    with pytest.raises(KeyError):
        poller.unregister(a)


def test_select_returns_nothing_at_its_timeout_and_an_event_that_comes_while_it_waits(poller, pair):
    import threading

    a, b = pair
    poller.register(a, READ, "conn")
    assert poller.select(0.05) == []
    writer = threading.Timer(0.1, b.send, args=(b"x",))
    writer.start()
    events = poller.select(30)  # the deadline only: the write wakes it
    writer.join()
    assert [data for data, _ in events] == ["conn"]
