"""A paced producer: a record that send() leaves for the next step goes out although no other send() comes.

send() does the I/O itself at most every KICK_INTERVAL while requests are in flight (producer_io.py), and
meanwhile the I/O thread leaves the sockets to it for DRIVE_WINDOW. Both are stretched here (to seconds and a
minute), so that a record left for the next step reaches the broker only if the wake timer hands it to the I/O
thread (or if send() sees nothing in flight and steps at once): without either it would wait a minute.
"""

from __future__ import annotations

import random

import pytest

from mmlog.client import producer_io, sender
from mmlog.client.producer import Producer
from mmlog.testing import EmbeddedBroker
from mmlog.testing.wait import wait_for
from tests.client.test_producer import fetch_all


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=2) as b:
        yield b


@pytest.fixture
def slow_paths(monkeypatch):
    """Every way but the one under test for a left record to leave takes a minute or more."""
    monkeypatch.setattr(producer_io, "KICK_INTERVAL", 2.0)
    monkeypatch.setattr(producer_io, "DRIVE_WINDOW", 60.0)
    monkeypatch.setattr(sender, "EXPIRE_EVERY", 60.0)


@pytest.mark.parametrize("acks, linger_ms, max_batch_records", [
    (1, 0, None),  # linger 0: each send() steps, or leaves its record in the open batch for the next step
    (1, 1000, 1),  # each record closes a batch of its own
    (0, 0, None),  # acks=0: nothing is ever in flight, send() paces its steps by time alone
])
def test_a_record_left_for_the_next_step_goes_out_without_another_send(broker, slow_paths, acks, linger_ms,
                                                                        max_batch_records):
    topic = f"paced-{random.randrange(1 << 30)}"
    with Producer(broker.bootstrap, acks=acks, linger_ms=linger_ms, max_batch_records=max_batch_records) as p:
        p.send(topic, b"warm", partition=0).get(30)  # metadata, connection, producer id
        first = p.send(topic, b"first", partition=0)  # steps: sent at once
        second = p.send(topic, b"second", partition=0)  # within KICK_INTERVAL of that step
        # No flush(), no get(), nothing else sent: both must reach the log and be acknowledged.
        got = wait_for(lambda: (lambda r: r if len(r) == 3 else None)(fetch_all(broker.bootstrap, topic, 0)),
                       what="the three records in the log")
        assert [r.value for r in got] == [b"warm", b"first", b"second"]
        if acks:
            wait_for(lambda: first.done() and second.done(), what="both acknowledged")
            assert (first.get(0).offset, second.get(0).offset) == (1, 2)


def test_a_timer_left_armed_by_a_send_that_another_step_overtook_changes_nothing(broker, slow_paths):
    """A send() after the interval steps itself; the timer armed for the earlier interval then finds a newer
    step and leaves the sockets to send() (records still arrive, in order)."""
    topic = f"paced-{random.randrange(1 << 30)}"
    with Producer(broker.bootstrap, acks=1, linger_ms=0) as p:
        p.send(topic, b"warm", partition=0).get(30)
        futures = [p.send(topic, b"%d" % i, partition=0) for i in range(3)]
        p._sender.next_kick = 0.0  # as if the interval had passed: the next send() steps
        futures.append(p.send(topic, b"3", partition=0))
        p.flush(30)
        assert [f.get(0).offset for f in futures] == [1, 2, 3, 4]
    assert [r.value for r in fetch_all(broker.bootstrap, topic, 0)] == [b"warm", b"0", b"1", b"2", b"3"]
