"""The compiled loop serves requests without touching the heap: a request's clocks, its sendfile offset and its
scratch live on the stack or in arrays kept from call to call, so numba's runtime counts no allocation (each
would be a malloc, an atomic reference count and a free, per request)."""

from __future__ import annotations

import select
import socket

import numpy as np
import pytest
from numba.core.runtime import _nrt_python, rtsys

from mmlog.config.settings import LogConfig
from mmlog.ipc.metrics_block import REGION_WORDS
from mmlog.log.partition import Partition
from mmlog.log.partition_table import PartitionTable
from mmlog.processors.compiled import fetch_path, loop, produce_path
from mmlog.protocol import RequestHeader, encode_request
from mmlog.protocol.messages import produce
from mmlog.protocol.records import build_batch
from mmlog.system import libc

REQUESTS = 50


@pytest.fixture
def table(tmp_path):
    part = Partition(tmp_path / "t-0", LogConfig())
    table = PartitionTable(8)
    table.ensure("t", 0, part)
    yield table
    table.clear()
    part.close()


@pytest.fixture
def pair():
    client, server = socket.socketpair()
    client.settimeout(10)  # an answer that never comes fails the test rather than hanging it
    server.setblocking(False)
    yield client, server
    client.close()
    server.close()


def frame(correlation_id: int) -> bytes:
    return bytes(encode_request(RequestHeader(produce.API_KEY, 8, correlation_id, "heap"), produce.REQUEST(
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": build_batch([(None, b"v" * 200)] * 50)}]}])))


class Loop:
    """`loop.serve`'s arguments for one FAST connection on a real epoll set, as a processor passes them."""

    def __init__(self, table, fd: int):
        self.epoll = select.epoll()
        self.epoll.register(fd, select.EPOLLIN)
        self.params = np.zeros(loop.PARAM_FIELDS, np.int64)
        self.params[loop.EPFD] = self.epoll.fileno()
        self.params[loop.TIMEOUT_MS] = 1
        self.params[loop.MAX_FRAME] = 1 << 20
        self.params[loop.METRICS_ON] = 1
        self.conns = np.zeros((fd + 1, loop.CONN_FIELDS), np.int64)
        self.conns[fd, loop.FAST] = 1
        self.conns[fd, loop.CLIENT_HASH] = loop.ANY_CLIENT
        self.conns[fd, loop.PRODUCE_SLOT] = -1
        one = np.zeros(1, np.int64)
        self.args = (self.params, np.zeros(8 * libc.EPOLL_EVENT_SIZE, np.uint8), self.conns,
                     np.zeros(1 << 20, np.uint8), np.zeros(1 << 18, np.uint8), loop.make_plan(loop.MIN_PLAN),
                     np.zeros((8, loop.OUT_FIELDS), np.int64), np.zeros(loop.COUNTER_FIELDS, np.int64),
                     loop.make_carry(4), (produce_path.make_scratch(), fetch_path.make_scratch()), table.arrays(),
                     (np.zeros(REGION_WORDS, np.int64), one, np.full(1, -1, np.int64), one.copy(),
                      *produce_path.no_quota_block()))

    def serve(self) -> int:
        return loop.serve(*self.args)

    def close(self) -> None:
        self.epoll.close()


def answer(sock) -> int:
    """The correlation id of the next response."""
    size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
    return int.from_bytes(sock.recv(size, socket.MSG_WAITALL)[:4], "big")


def allocations() -> int:
    return rtsys.get_allocation_stats().alloc


def call_cost(served) -> int:
    """What one call from Python allocates when there is nothing to serve: each array argument's meminfo,
    made as Python's arrays cross into compiled code (the processor makes one call for many requests)."""
    before = allocations()
    assert served.serve() == 0
    return allocations() - before


def test_produce_requests_served_in_compiled_code_allocate_nothing(table, pair):
    client, server = pair
    served = Loop(table, server.fileno())
    _nrt_python.memsys_enable_stats()
    try:
        client.sendall(frame(0))
        assert served.serve() == 0  # served in full: nothing for Python
        assert answer(client) == 0
        idle = call_cost(served)
        before = allocations()
        for i in range(1, REQUESTS + 1):
            client.sendall(frame(i))
            assert served.serve() == 0
            assert answer(client) == i
        assert allocations() - before == REQUESTS * idle
        assert served.args[7][loop.REQUESTS] == REQUESTS + 1  # all served by compiled code
    finally:
        _nrt_python.memsys_disable_stats()
        served.close()
