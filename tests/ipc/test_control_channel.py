"""The control channel contains what goes wrong on either end: deadlines, failing callbacks, dead and stuck
processors. Both ends run for real here, over socketpairs; the server on its own thread, as in the broker."""

import socket
import threading
import time

import pytest

from mmlog.ipc.control_channel import (ControlClient, ControlServer, ControlTimedOut, ControlUnavailable,
                                       MessageReader, pack)


def pump(client: ControlClient, until, timeout: float = 5.0) -> None:
    """Be the processor's loop: read replies and expire deadlines until `until()` holds."""
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "the reply never came"
        try:
            client.flush()
            client.on_readable()
        except ControlUnavailable:
            return
        client.expire()
        time.sleep(0.005)


@pytest.fixture
def server():
    answers = {}  # op -> what its handler does with (args, reply)
    server = ControlServer({"echo": lambda args, reply: reply(args),
                            "never": lambda args, reply: None,
                            "later": lambda args, reply: answers.setdefault("later", reply)})
    server.start()
    server.answers = answers
    yield server
    server.stop()


def channel(server: ControlServer) -> ControlClient:
    main_end, processor_end = socket.socketpair()
    server.add_channel(main_end)
    client = ControlClient(processor_end)
    client.main_end = main_end
    return client


def test_a_call_not_answered_by_its_deadline_gets_control_timed_out_and_its_late_reply_is_dropped(server):
    client = channel(server)
    got = []
    client.call("later", None, lambda ok, value: got.append((ok, value)), timeout_s=0.2)
    assert client.next_deadline() is not None
    pump(client, lambda: got)
    assert got[0][0] is False and isinstance(got[0][1], ControlTimedOut)
    assert client.waiting == 0 and client.next_deadline() is None
    server.call_soon(lambda: server.answers["later"]("too late"))
    client.call("echo", 1, lambda ok, value: got.append((ok, value)))
    pump(client, lambda: len(got) == 2)
    assert got[1] == (True, 1)  # the late reply ran nothing


def test_a_callback_that_raises_runs_its_fallback_and_the_replies_read_with_it_still_run(server):
    client = channel(server)
    got, fallbacks = [], []

    def broken(ok, value):
        raise KeyError("gone")

    client.call("echo", "a", broken, fallback=fallbacks.append)
    client.call("echo", "b", lambda ok, value: got.append(value))
    pump(client, lambda: got)
    assert got == ["b"]
    assert [type(e) for e in fallbacks] == [KeyError] and client.failed_callbacks == 1


def test_a_fallback_that_raises_too_is_logged_and_goes_no_further(server, caplog):
    client = channel(server)

    def broken(*_):
        raise ValueError("broken")

    got = []
    client.call("echo", 1, broken, fallback=broken)
    client.call("echo", 2, lambda ok, value: got.append(value))
    pump(client, lambda: got)
    assert got == [2]
    assert "could not be answered either" in caplog.text


def test_the_control_plane_going_away_fails_every_waiting_call_with_control_unavailable(server):
    client = channel(server)
    got = []
    for _ in range(3):
        client.call("never", None, lambda ok, value: got.append((ok, type(value))))
    server.remove_channel(client.main_end)
    pump(client, lambda: len(got) == 3)
    assert got == [(False, ControlUnavailable)] * 3


def test_a_channel_dropped_twice_and_closed_under_the_server_leaves_the_control_thread_serving(server):
    """A processor's death (remove_channel) and its channel's end (EOF) both drop the channel, in either
    order, in the same pass of the loop or not; a socket closed behind the selector's back is dropped too."""
    for _ in range(20):
        client = channel(server)
        client.call("echo", 0, lambda *_: None)
        client.sock.close()  # EOF reaches the server
        server.remove_channel(client.main_end)
        server.remove_channel(client.main_end)
    closed = channel(server)
    time.sleep(0.05)
    closed.main_end.close()  # its fd is -1 while the selector still holds it
    server.remove_channel(closed.main_end)
    alive = channel(server)
    got = []
    alive.call("echo", "still here", lambda ok, value: got.append(value))
    pump(alive, lambda: got)
    assert got == ["still here"] and server.thread.is_alive()


def test_a_processor_that_stops_reading_never_blocks_the_control_thread(server):
    """Replies it does not read wait in its channel's buffer; the other channels are answered meanwhile."""
    stuck = channel(server)
    big = b"x" * (1 << 20)
    for _ in range(16):  # 16 MiB of replies, far beyond a socket buffer
        stuck.call("echo", big, lambda *_: None)
    time.sleep(0.2)
    other = channel(server)
    got = []
    other.call("echo", "answered", lambda ok, value: got.append(value))
    pump(other, lambda: got, timeout=5)
    assert got == ["answered"]
    pump(stuck, lambda: stuck.waiting == 0, timeout=30)  # and the stuck one gets all of its replies later
    assert stuck.waiting == 0


def test_an_answer_that_cannot_be_pickled_is_sent_as_a_failure(server):
    server.handlers["lock"] = lambda args, reply: reply(threading.Lock())
    client = channel(server)
    got = []
    client.call("lock", None, lambda ok, value: got.append((ok, value)))
    pump(client, lambda: got)
    assert got[0][0] is False and "unsendable answer" in str(got[0][1])


def test_a_channel_that_sends_garbage_is_dropped_and_the_others_are_served(server):
    client = channel(server)
    ended = []
    client.call("never", None, lambda ok, value: ended.append(type(value)))
    client.sock.sendall(b"\x00\x00\x00\x05junk!")
    pump(client, lambda: ended)
    assert ended == [ControlUnavailable]  # its channel closed: the processor stops, and is replaced
    got = []
    other = channel(server)
    other.call("echo", 1, lambda ok, value: got.append(value))
    pump(other, lambda: got)
    assert got == [1]


def test_messages_split_anywhere_are_read_whole():
    data = pack((1, "op", {"a": 1})) + pack((2, "op", None))
    for cut in range(len(data) + 1):
        reader = MessageReader()
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == [(1, "op", {"a": 1}), (2, "op", None)]
