"""A request in flight inside a processor, and what a handler may answer."""

from __future__ import annotations

import logging
import time
from typing import Any

from mmlog.errors import KafkaError
from mmlog.processors.log_cap import LogCap
from mmlog.processors.request_metrics import COUNTED_BY_HANDLER, count_errors
from mmlog.protocol import RequestHeader, encode_response, encode_response_parts
from mmlog.processors.handler_context import HandlerContext

log = logging.getLogger(__name__)
_failures = LogCap(log, 1, "failed deferred requests")

DEFERRED = object()  # the handler will call request.respond later
NO_RESPONSE = object()  # nothing goes back (Produce with acks=0)


def queue_frame(ctx: HandlerContext, conn, frame: bytearray) -> None:
    """Queue an encoded response frame for writing (dropped if the connection is closing)."""
    if conn.closing:
        conn.done()
        return
    conn.queue((frame,))
    ctx.wants_write(conn)


class CloseConnection(Exception):
    """The request cannot be answered: close the connection, as Kafka does."""


class Request:
    """A decoded request on its way through a handler."""

    __slots__ = ("conn", "header", "body", "ctx", "arrived", "received", "handled", "counted")

    def __init__(self, conn, header: RequestHeader, body: Any, ctx: HandlerContext) -> None:
        self.conn = conn
        self.header = header
        self.body = body
        self.ctx = ctx
        self.received = time.monotonic()
        arrivals = conn.arrivals
        self.arrived = arrivals[0] if arrivals else self.received  # its frame was complete (connection.py)
        self.handled = 0.0  # when its handler returned DEFERRED: the wait after it is remote time
        self.counted = True  # False: whoever answers it counts it (a group of Produce requests, dispatch.py)

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, body: Any, with_files: bool = False) -> None:
        """Queue the response (as parts around file slices if with_files) for writing.

        body is a response body for the codec, or a whole frame already encoded (a bytearray,
        size prefix included), as the Produce handler writes its common answer.
        """
        if self.conn.closing:
            self.conn.done()
            return
        if body.__class__ is bytearray:
            self.conn.queue((body,))
        elif with_files:
            self.conn.queue(encode_response_parts(self.header, body), has_files=True)
        else:
            self.conn.queue((encode_response(self.header, body),))
        self.ctx.wants_write(self.conn)
        metrics = self.ctx.metrics
        if self.counted and metrics.on:
            answered = time.monotonic()
            api = self.header.api_key
            self.conn.mark_sending(api, 1, self.arrived, self.received, self.handled or answered, answered)
            if api not in COUNTED_BY_HANDLER:
                count_errors(metrics, api, body)

    def fail(self, exc: BaseException) -> None:
        """A deferred request that cannot be answered: drop the connection (an unexpected exception is
        logged with its traceback, at most once a second)."""
        if isinstance(exc, (KafkaError, OSError)):
            log.warning("closing connection from %s: %s", self.conn.peer, exc)
        else:
            _failures(logging.ERROR, "closing connection from %s: %s: %s", self.conn.peer, exc.__class__.__name__,
                      exc, exc_info=exc)
        self.conn.closing = True
        self.conn.done()
        self.ctx.wants_write(self.conn)
