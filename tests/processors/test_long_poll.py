"""Fetch long polls: parked until min_bytes arrive (from any processor) or max_wait_ms passes."""

import os
import select
import socket
import threading

from mmlog.ipc.metrics_block import NULL_REGION
from mmlog.ipc.wake_board import WakeBoard
from mmlog.log.manager import LogManager
from mmlog.processors.connection import Connection
from mmlog.processors.dispatch import handle_requests
from mmlog.processors.purgatory import Purgatory
from mmlog.protocol import RequestHeader, decode_response, encode_request
from mmlog.protocol.messages import fetch, metadata
from mmlog.protocol.records import build_batch
from mmlog.testing import LocalHandlerContext
from mmlog.testing.connections import connect, fetch_one
from mmlog.testing.scrape import scrape
from mmlog.testing.wait import wait_for
from tests.processors.test_bad_input import produce_one


def parked(broker) -> float:
    """Fetches (and acks=all produces) parked in the broker's purgatories now."""
    return scrape(broker).get("kafka_server_delayedoperationpurgatory_purgatorysize")


def test_a_parked_fetch_wakes_on_a_produce_on_any_processor(broker):
    # Connections go to processors round-robin, so over five rounds the waiter sits
    # both on the producer's processor and on the other one.
    producer = connect(broker)
    producer.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "longpoll"}]))
    for offset in range(5):
        with connect(broker) as waiter:
            waiter.sock.settimeout(150)
            done = {}

            def wait():
                # Two minutes' wait unless woken: longer than the join's deadline below.
                done["part"] = fetch_one(waiter, "longpoll", 0, offset, max_wait_ms=120_000)

            thread = threading.Thread(target=wait, daemon=True)
            thread.start()
            wait_for(lambda: parked(broker) >= 1, what="the fetch to park")
            assert produce_one(producer, "longpoll", 0, build_batch([(None, b"%d" % offset)])).error_code == 0
            thread.join(60)
            assert not thread.is_alive(), "the parked fetch was not woken by the append"
            assert len(done["part"].records) > 0
    producer.close()


def test_a_fetch_with_nothing_to_read_answers_empty_after_max_wait(broker):
    with connect(broker) as conn:
        conn.request(metadata.API_KEY, 8, metadata.REQUEST(topics=[{"name": "quiet"}]))
        got = []
        thread = threading.Thread(target=lambda: got.append(fetch_one(conn, "quiet", 0, 0, max_wait_ms=5000)),
                                  daemon=True)
        thread.start()
        wait_for(lambda: parked(broker) >= 1 or got, what="the fetch to park")
        assert not got, "answered at once: not parked for its max_wait"
        thread.join(60)
        assert got[0].error_code == 0 and len(got[0].records) == 0
        wait_for(lambda: parked(broker) == 0, what="the purgatory to empty")


class AppendsBeforeParking(Purgatory):
    """Processor 0's purgatory, with processor 1's append landing in the window where a lost wake-up
    hides: after the fetch looked and found nothing, before its parked count is published."""

    def __init__(self, board: WakeBoard, other: LogManager) -> None:
        super().__init__(lambda n: board.set_parked(0, n))
        self.board, self.other = board, other

    def park(self, request, deadline, retry, expire) -> None:
        self.other.partition("t", 0).append(build_batch([(None, b"late")]))
        self.board.notify_others(1)  # as processor 1 does after every append: no fetch parked in slot 0 yet
        super().park(request, deadline, retry, expire)


def test_a_record_appended_by_another_processor_while_a_fetch_looked_is_answered_when_it_parks(tmp_path):
    owner = LogManager(tmp_path)
    owner.create_topic("t", 1)
    here, there = LogManager(tmp_path, owner=False), LogManager(tmp_path, owner=False)  # processors 0 and 1
    board = WakeBoard(2)
    ctx = LocalHandlerContext(here)
    ctx.purgatory = AppendsBeforeParking(board, there)
    client, server = socket.socketpair()
    conn = Connection(server, 1 << 20)
    conn.reader.feed(encode_request(RequestHeader(fetch.API_KEY, 11, 7, "late"), fetch.REQUEST(
        max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20,
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}])))
    handle_requests(ctx, conn)
    # Processor 1 wrote no wake-up (it saw no parked fetch here): only the second look can answer.
    assert select.select([board.fds[0]], [], [], 0)[0] == []
    assert len(ctx.purgatory) == 0 and board.parked[0] == 0
    conn.flush(NULL_REGION)
    client.settimeout(10)
    size = int.from_bytes(client.recv(4, socket.MSG_WAITALL), "big")
    correlation_id, body = decode_response(fetch.API_KEY, 11, client.recv(size, socket.MSG_WAITALL))
    part = body.responses[0].partitions[0]
    assert (correlation_id, part.error_code, part.high_watermark) == (7, 0, 1)
    assert len(part.records) > 0 and b"late" in bytes(part.records)
    client.close()
    conn.close()
    for manager in (here, there, owner):
        manager.close()
    for fd in board.fds:
        os.close(fd)
