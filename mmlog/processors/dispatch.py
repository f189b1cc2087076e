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
"""

from __future__ import annotations

import logging

from mmlog.errors import KafkaError
from mmlog.processors.handlers import HANDLERS
from mmlog.processors.request import DEFERRED, NO_RESPONSE, CloseConnection, Request
from mmlog.protocol import (
    API_VERSIONS,
    ProtocolError,
    decode_request_body,
    encode_unsupported_api_versions,
    is_supported,
    parse_request_header,
)

log = logging.getLogger(__name__)

def handle_frame(ctx, conn, frame) -> None:
    """Decode one request frame and run its handler; CloseConnection for what cannot be answered."""
    try:
        header, offset = parse_request_header(frame)
    except ProtocolError as exc:
        raise CloseConnection(f"unparseable request header: {exc}") from exc
    handler = HANDLERS.get(header.api_key)
    if handler is None or not is_supported(header.api_key, header.api_version):
        if header.api_key == API_VERSIONS:
            conn.queue((encode_unsupported_api_versions(header),))
            ctx.wants_write(conn)
            return
        raise CloseConnection(f"unsupported API {header.api_key} v{header.api_version}")
    try:
        body = decode_request_body(header, frame, offset)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed {handler.__module__.rsplit('.', 1)[-1]} request: {exc}") from exc
    request = Request(conn, header, body, ctx)
    try:
        result = handler.handle(ctx, request)
    except KafkaError as exc:
        raise CloseConnection(f"{exc.__class__.__name__}: {exc}") from exc
    if result is NO_RESPONSE:
        conn.done()
    elif result is not DEFERRED:
        request.respond(result, with_files=getattr(handler, "WITH_FILES", False))


def advertised_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for the APIs this broker has handlers for: the ApiVersions answer."""
    from mmlog.protocol import supported_versions

    return [(k, lo, hi) for k, lo, hi in supported_versions() if k in HANDLERS]
