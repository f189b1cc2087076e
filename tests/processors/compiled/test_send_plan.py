"""The compiled loop's send plan: response bytes with file ranges at their gaps, sent as far as the socket
takes them, and the rest handed to Python's OutQueue; every byte arrives once and in order.

A real loopback TCP connection with small buffers, a real file: the sender stops wherever the socket is
full (inside a byte piece or inside a file range), and what is left goes on from exactly there.
"""

from __future__ import annotations

import os
import random
import socket

import numpy as np
import pytest

from mmlog.processors.compiled import loop
from mmlog.processors.compiled.fetch_path import GAP, PLAN_FD, PLAN_LEN, PLAN_OFFSET
from mmlog.processors.compiled.path import unsent
from mmlog.processors.sendfile import OutQueue


@pytest.fixture
def pair():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    server.setblocking(False)
    client.setblocking(False)
    yield server, client
    server.close()
    client.close()


@pytest.fixture
def answer(tmp_path):
    """(wbuf, plan, file, the bytes expected): 3 file ranges at gaps in 1000 header bytes, the last at the end."""
    rng = random.Random(5)
    data = rng.randbytes(3 << 20)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed after the test (or by it)
    wbuf = np.frombuffer(rng.randbytes(1000), np.uint8).copy()
    ranges = [(100, 0, 1 << 20), (400, (1 << 20) + 5, 700_000), (1000, 2 << 20, 500_000)]
    plan = loop.make_plan(8)
    for i, (gap, offset, length) in enumerate(ranges):
        plan[i, GAP], plan[i, PLAN_FD], plan[i, PLAN_OFFSET], plan[i, PLAN_LEN] = gap, file.fileno(), offset, length
    expected, at = b"", 0
    for gap, offset, length in ranges:
        expected += bytes(wbuf[at:gap]) + data[offset:offset + length]
        at = gap
    yield wbuf, plan, file, expected
    file.close()


def drain(sock, into: bytearray, most: int = 1 << 30) -> None:
    while most > 0:
        try:
            data = sock.recv(min(most, 1 << 16))
        except BlockingIOError:
            return
        into += data
        most -= len(data)


def test_the_plan_resumes_where_the_socket_stopped_until_all_is_sent(pair, answer):
    server, client = pair
    wbuf, plan, _, expected = answer
    received = bytearray()
    at, k, stops = 0, 0, 0
    rng = random.Random(1)
    while True:
        at, k = loop._send_plan(server.fileno(), wbuf, at, wbuf.shape[0], plan, k, 3)
        if at == wbuf.shape[0] and k == 3:
            break
        stops += 1
        drain(client, received, rng.choice([1, 100, 5000, 70_000]))  # stops inside byte pieces too
    client.setblocking(True)
    client.settimeout(10)
    while len(received) < len(expected):
        received += client.recv(1 << 16)
    assert stops > 10
    assert bytes(received) == expected


def test_what_the_socket_did_not_take_goes_on_from_pythons_queue(pair, answer):
    server, client = pair
    wbuf, plan, file, expected = answer
    at, k = loop._send_plan(server.fileno(), wbuf, 0, wbuf.shape[0], plan, 0, 3)
    assert (at, k) != (wbuf.shape[0], 3)
    files = {file.fileno(): os.fdopen(os.dup(file.fileno()), "rb", buffering=0)}  # as path.py holds them
    file.close()  # the table's descriptor may go: the queue's dup keeps the range readable
    queue = OutQueue()
    queue.push(unsent(wbuf, plan, at, wbuf.shape[0], k, 3 - k, files))
    received = bytearray()
    while not queue.write(server):
        drain(client, received)
    client.setblocking(True)
    client.settimeout(10)
    while len(received) < len(expected):
        received += client.recv(1 << 16)
    assert bytes(received) == expected
