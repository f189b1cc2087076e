"""From a request frame to a handler, and from its answer to response bytes.

The data path reads top to bottom here: frame -> header -> (version check) ->
body -> handler -> response parts -> connection queue. Handlers live in
`handlers/<api>.py`, one module per API, each with `API_KEY` and
`handle(ctx, request)`, which returns the response body, `DEFERRED` (it will call
`request.respond` later: a parked fetch, a call to the control plane) or
`NO_RESPONSE` (Produce with acks=0).

What a Kafka broker does with bad requests, we do: an ApiVersions version above
ours gets error 35 in the v0 layout (never a closed socket); any other unknown API
or unsupported version, or a body that does not parse, closes the connection.

On a SASL listener a connection's requests pass a gate first (`sasl_gate`): until
it has authenticated, or once its session expired, only ApiVersions, SaslHandshake
and SaslAuthenticate are served and anything else closes the connection (Kafka's
ILLEGAL_SASL_STATE behaviour); after a SaslHandshake v0 the frames are bare SASL
tokens. One attribute test per request on every other connection.

`handle_requests` takes a connection's queued requests in order. Consecutive
Produce requests (a pipelining producer's) are handled as one group, so that their
appends share a lock hold and a write (`handlers/produce.py`); their responses are
queued in request order like any others.

Client quotas (`quotas.py`) are applied here, per request, for clients that have one:
the throttle time goes into the response and the connection is muted for it.
"""

from __future__ import annotations

import logging
import struct
import time

from mmlog.errors import KafkaError
from mmlog.processors.handlers import HANDLERS, produce
from mmlog.processors.request import DEFERRED, NO_RESPONSE, CloseConnection, Request, queue_frame
from mmlog.processors.request_metrics import count_answered, count_unanswered
from mmlog.processors.sasl import ALLOWED_BEFORE, AUTHENTICATE, log_failure
from mmlog.protocol.header import peek_client_id, request_matcher
from mmlog.protocol.messages import APIS
from mmlog.security.sasl import AuthenticationFailed
from mmlog.protocol import (
    API_VERSIONS,
    ProtocolError,
    decode_request_body,
    encode_unsupported_api_versions,
    is_supported,
    parse_request_header,
)
from mmlog.processors.handler_context import HandlerContext

log = logging.getLogger(__name__)

# Produce requests handled as one group. A cap well below what a deep pipeline queues (a
# producer with 128 requests in flight) splits its run into several groups answered one
# after the other, so the producer works on the first answers while we append the rest:
# measured 51,000 msg/s at batch 1 with groups of at most 32, 48,000 with 64, 34,000 with 8.
# Splitting smaller runs (answering the first half of 5 or 16 early) measured slower: on two
# cores CPU runs out first, and each extra send and wake-up costs more than the overlap gains.
# Under acks=all at RF 3 every group costs a replication round trip (its followers' fetches, the
# HW move, the wake-ups): groups of 64 (Connection's MAX_QUEUED_FRAMES) halved the follower
# fetches per record and cut the three brokers' CPU per record by a fifth against 32, in each of
# 3 alternating rounds (docs/benchmarks.md, "Replication and idempotence").
MAX_GROUP = 64
UNSUPPORTED_VERSION = 35


def handle_requests(ctx: HandlerContext, conn) -> None:
    """Handle conn's queued requests in order, until one is deferred or none is left.

    A run of pipelined Produce requests is handled as groups of up to MAX_GROUP, each
    appended and answered together. CloseConnection for a request that cannot be
    answered (those before it are answered).
    """
    while True:
        frame = conn.next_request()
        if frame is None:
            return
        if conn.sasl is not None and not conn.sasl.open():
            sasl_gate(ctx, conn, frame)
            continue
        if _is_produce(frame):
            # A group, even of one: the group path reads a repeated request shape without the codec. A
            # client with a produce quota is answered (and maybe muted) one request at a time, as Kafka does.
            alone = ctx.quotas.enabled and ctx.quotas.limits_produce(conn, peek_client_id(frame))
            handle_produce_group(ctx, conn, [frame, *([] if alone else conn.take_queued(_is_produce, MAX_GROUP - 1))])
            continue
        handle_frame(ctx, conn, frame)


# A Produce request of a version we serve, told by its first four bytes (a frame of a pipelining producer is
# taken into the group without being parsed).
_is_produce = request_matcher(produce.API_KEY, (v for v in range(256) if is_supported(produce.API_KEY, v)))


def handle_produce_group(ctx: HandlerContext, conn, frames: list) -> None:
    """Decode pipelined Produce requests and answer them as one group (see handlers/produce.py).

    A frame of the shape the connection's previous one-partition request had is read by
    that shape's template; any other is decoded by the codec, and its shape kept for the next.
    """
    requests = []
    failure = None
    received = time.monotonic()
    refused = []  # per request: {topic: error code} or None (handlers/produce.py)
    for frame in frames:
        try:
            request, transactional_id = _read_produce(conn, frame)
        except CloseConnection as exc:
            failure = exc
            break
        requests.append(request)
        refused.append(produce.refusals(ctx, conn, transactional_id, request[2]))
    if requests:
        quotas = ctx.quotas
        quota, throttle = quotas.enabled, 0
        if quota:  # a client quota: the group's bytes count as they arrive (processors/quotas.py)
            client_id, started = requests[0][0].client_id, time.perf_counter()
            throttle = max(quotas.produce(conn, client_id, sum(len(f) for f in frames[:len(requests)])),
                           quotas.request_throttle(conn, client_id))
        results = produce.handle_group(ctx, requests, throttle, refused if any(refused) else None)
        _answer_group(ctx, conn, requests, results, received)
        if quota:
            quotas.handled(conn, client_id, time.perf_counter() - started)
            if throttle:
                ctx.throttle(conn, throttle)
    if failure is not None:
        raise failure


def _read_produce(conn, frame) -> tuple[tuple, str | None]:
    """((header, acks, topics, timeout ms), transactional id) of a Produce frame: read by the shape of the
    connection's last one when it has it, else decoded (and its shape kept). CloseConnection if it does not
    parse."""
    shape = conn.produce_shape
    request = shape.read(frame) if shape is not None else None
    if request is not None:
        return request, shape.transactional_id
    header, offset = _parse_header(frame)
    body = _decode_body(header, frame, offset, produce)
    conn.produce_shape = produce.RequestShape.learn(header, body)
    return (header, *produce.parts(body)), body.transactional_id


def _answer_group(ctx: HandlerContext, conn, requests: list, results: list, received: float) -> None:
    """Answer a group's Produce requests in order (handlers/produce.py's results), parking from the first
    that waits for followers on; each counted in the request metrics when its answer is written."""
    handled = time.monotonic()
    metrics = ctx.metrics
    # When each answered request's frame was complete, in the order they are answered (None: metrics off).
    arrivals = (count_unanswered(metrics, conn, produce.API_KEY, results, NO_RESPONSE, received, handled)
                if metrics.on else None)
    answered_now, responded = [0], [0]  # answered before respond_in_order returns; the others waited

    def respond(header, result) -> None:
        if arrivals is None and result.__class__ is bytearray:  # metrics off, the template's frame: no Request
            queue_frame(ctx, conn, result)
            return
        request = Request(conn, header, None, ctx)
        if answered_now[0] >= 0:
            request.counted = False  # counted below, all with one call
            answered_now[0] += 1
        else:
            request.received, request.handled = received, handled
            if arrivals is not None:
                request.arrived = arrivals[responded[0]]
        responded[0] += 1
        request.respond(result)

    produce.respond_in_order(ctx, conn, [(r[0], result) for r, result in zip(requests, results)], respond)
    if answered_now[0] and arrivals is not None:
        count_answered(conn, produce.API_KEY, arrivals[:answered_now[0]], received, time.monotonic())
    answered_now[0] = -1


def answer_appended(ctx: HandlerContext, conn, frames, held: list, received: float) -> None:
    """Answer acks=-1 Produce requests the compiled path appended (processors/compiled/): `frames` holds
    them back to back, size prefixes included, and `held` their partitions' (base offset, last offset, log
    start offset, waits), in request order. They are conn's requests in flight from here, each answered when
    the high watermark passes its records, in order, as if the group path had appended them."""
    requests, answers, at, row = [], [], 0, 0
    while at < len(frames):
        size = int.from_bytes(frames[at:at + 4], "big")
        request, _ = _read_produce(conn, frames[at + 4:at + 4 + size])
        header, _, topics, timeout_ms = request
        n = sum(len(partitions) for _, partitions in topics)
        requests.append(request)
        answers.append(produce.appended_elsewhere(ctx.manager, header, topics, timeout_ms, held[row:row + n]))
        at += 4 + size
        row += n
    conn.hold(received, len(requests))
    _answer_group(ctx, conn, requests, answers, received)


def sasl_gate(ctx: HandlerContext, conn, frame) -> None:
    """A request on a connection not (or no longer) authenticated: the SASL exchange, or the door."""
    session = conn.sasl
    if session.legacy and session.state is AUTHENTICATE:
        _legacy_token(ctx, conn, bytes(frame))
        return
    header, offset = _parse_header(frame)
    key = header.api_key
    if key not in ALLOWED_BEFORE:
        api = APIS.get(key)
        name = api.name if api else f"API {key}"
        state = "after the SASL session expired" if session.expired() else "before SASL authentication"
        raise CloseConnection(f"ILLEGAL_SASL_STATE: {name} request {state}")
    handle_frame(ctx, conn, frame, (header, offset))


def _legacy_token(ctx: HandlerContext, conn, token: bytes) -> None:
    """After SaslHandshake v0: a bare token in, a bare size-prefixed token out (no Kafka header)."""
    try:
        answer = conn.sasl.step(token, ctx.reauth_ms)
    except AuthenticationFailed as exc:
        log_failure(conn, conn.sasl.mechanism, str(exc))

        def close() -> None:
            conn.closing = True
            conn.done()
            ctx.wants_write(conn)

        ctx.later(ctx.auth_failure_delay_s, close)  # the connection stays busy: nothing else is read
        return
    conn.principal = conn.sasl.principal or conn.principal
    conn.queue((struct.pack(">i", len(answer)) + answer,))
    ctx.wants_write(conn)


def handle_frame(ctx: HandlerContext, conn, frame, parsed=None) -> None:
    """Decode one request frame and run its handler; CloseConnection for what cannot be answered."""
    header, offset = parsed or _parse_header(frame)
    handler = HANDLERS.get(header.api_key)
    if handler is None or not is_supported(header.api_key, header.api_version):
        if header.api_key == API_VERSIONS:
            conn.queue((encode_unsupported_api_versions(header),))
            ctx.wants_write(conn)
            ctx.metrics.error(API_VERSIONS, UNSUPPORTED_VERSION)
            return
        raise CloseConnection(f"unsupported API {header.api_key} v{header.api_version}")
    body = _decode_body(header, frame, offset, handler)
    request = Request(conn, header, body, ctx)
    quotas = ctx.quotas
    quota = quotas.enabled
    if quota:
        throttle, started = quotas.request_throttle(conn, header.client_id), time.perf_counter()
    try:
        result = handler.handle(ctx, request)
    except KafkaError as exc:
        raise CloseConnection(f"{exc.__class__.__name__}: {exc}") from exc
    if quota:
        quotas.handled(conn, header.client_id, time.perf_counter() - started)
        if throttle and result is not DEFERRED and result is not NO_RESPONSE and hasattr(result, "throttle_time_ms"):
            result.throttle_time_ms = throttle  # a deferred answer (a parked fetch) carries its own
        else:
            throttle = 0
    if result is NO_RESPONSE:
        conn.done()
    elif result is DEFERRED:
        request.handled = time.monotonic()  # from here on it waits: remote time (ipc/metrics_block.py)
    else:
        request.respond(result, with_files=getattr(handler, "WITH_FILES", False))
    if quota and throttle:
        ctx.throttle(conn, throttle)


def _parse_header(frame) -> tuple:
    """(header, body offset) of a request frame; CloseConnection if it does not parse."""
    try:
        return parse_request_header(frame)
    except ProtocolError as exc:
        raise CloseConnection(f"unparseable request header: {exc}") from exc


def _decode_body(header, frame, offset: int, handler):
    """The body of a request of a supported API and version; CloseConnection if it does not parse."""
    try:
        return decode_request_body(header, frame, offset)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed {handler.__name__.rsplit('.', 1)[-1]} request: {exc}") from exc
