"""The fetcher's kept receive buffers: a frame still referred to is never overwritten; a free buffer is reused."""

from __future__ import annotations

import gc
import socket
import threading

import numpy as np
import pytest

from mmlog.client.connection import ConnectionClosed
from mmlog.spark.fetch import ReceiveBuffers


def frames(*bodies: bytes) -> bytes:
    return b"".join(len(b).to_bytes(4, "big") + b for b in bodies)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def send_later(sock, data: bytes) -> threading.Thread:
    """Write from a thread (more than a socket buffer holds would block this one), in small pieces."""
    def run():
        for i in range(0, len(data), 7919):
            sock.sendall(data[i:i + 7919])
    t = threading.Thread(target=run)
    t.start()
    return t


def test_frames_in_use_keep_their_bytes_and_free_buffers_are_reused(pair):
    a, b = pair
    bodies = [bytes([i]) * (300_000 + i) for i in range(8)]
    writer = send_later(a, frames(*bodies))
    buffers = ReceiveBuffers()
    held = []
    for i in range(4):  # four held at once: more than it keeps, so some live in buffers of their own
        held.append(buffers.read(b))
    assert [bytes(f) for f in held] == bodies[:4]
    views = [np.frombuffer(f, np.uint8)[10:20] for f in held]  # views made from them keep them alive too
    del held
    gc.collect()
    later = [bytes(buffers.read(b)) for _ in range(4)]  # each dropped at once
    writer.join()
    assert later == bodies[4:]
    assert [v.tolist() for v in views] == [[i] * 10 for i in range(4)]  # never overwritten
    assert len(buffers._buffers) <= ReceiveBuffers.KEEP


def test_a_free_buffer_serves_the_next_frames(pair):
    a, b = pair
    writer = send_later(a, frames(b"x" * 100_000, b"y" * 90_000, b"z" * 5))
    buffers = ReceiveBuffers()
    first = buffers.read(b)
    base = id(first.obj)
    assert bytes(first) == b"x" * 100_000
    del first
    second = buffers.read(b)
    assert id(second.obj) == base and bytes(second) == b"y" * 90_000  # the same buffer, freed, read into again
    third = buffers.read(b)  # `second` still held: another buffer
    assert id(third.obj) != base and bytes(third) == b"z" * 5 and bytes(second) == b"y" * 90_000
    writer.join()


def test_a_closed_connection_or_a_bad_size_is_an_error(pair):
    a, b = pair
    a.sendall(b"\x00\x00\x00\x05ab")
    a.close()
    with pytest.raises(ConnectionClosed):
        ReceiveBuffers().read(b)
    c, d = socket.socketpair()
    with c, d:
        c.sendall(b"\xff\xff\xff\xff")
        with pytest.raises(ConnectionClosed):
            ReceiveBuffers().read(d)


def test_a_free_buffer_too_small_makes_room_for_a_bigger_one(pair):
    a, b = pair
    writer = send_later(a, frames(*(bytes([i]) * 70_000 for i in range(3)), b"w" * 200_000))
    buffers = ReceiveBuffers()
    held = [buffers.read(b) for _ in range(3)]  # three buffers of 64 KiB and more, all in use
    assert len(buffers._buffers) == ReceiveBuffers.KEEP
    del held[0]
    big = buffers.read(b)  # the free one is too small: replaced
    assert bytes(big) == b"w" * 200_000 and len(buffers._buffers) == ReceiveBuffers.KEEP
    assert [bytes(h) for h in held] == [bytes([1]) * 70_000, bytes([2]) * 70_000]
    writer.join()
