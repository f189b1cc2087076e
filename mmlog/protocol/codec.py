"""Whole frames: size prefix + header + body, for the broker and the client.

Broker side::

    header, offset = parse_request_header(frame)      # any API, any version
    if not is_supported(header.api_key, header.api_version):
        if header.api_key == API_VERSIONS: send(encode_unsupported_api_versions(header))
        ...                                             # else close, as Kafka does
    body = decode_request_body(header, frame, offset)
    send(encode_response(header, response_body))        # one bytearray, prefix included
    parts = encode_response_parts(header, fetch_body)   # Fetch: chunks + placeholders

Client side::

    send(encode_request(RequestHeader(key, version, correlation_id, client_id), body))
    sendmsg(encode_request_parts(header, produce_body))   # record batches not copied
    correlation_id, body = decode_response(key, version, frame)
"""

from __future__ import annotations

import struct

from .errors import UnsupportedVersionError
from .header import (RequestHeader, encode_request_header, encode_response_header,
                     parse_request_header, parse_response_header, response_header_version)
from .messages import APIS, get_api, supported_versions
from .messages import api_versions
from .primitives import PartsWriter
from .schema import as_memoryview, parts_size

API_VERSIONS = api_versions.API_KEY
UNSUPPORTED_VERSION = 35  # Errors.java

_SIZE = struct.Struct(">i")
_PREFIX = b"\x00\x00\x00\x00"  # size prefix, patched once the frame is encoded


def is_supported(api_key: int, api_version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and api.supports(api_version)


# --- broker side ----------------------------------------------------------------------

def decode_request_body(header: RequestHeader, frame, offset: int):
    """Decode the body of a request whose header `parse_request_header` returned."""
    try:
        api = get_api(header.api_key, header.api_version)
    except UnsupportedVersionError as exc:
        exc.header = header
        raise
    return api.request.decode(frame, header.api_version, offset)


def decode_request(frame) -> tuple[RequestHeader, object]:
    """Decode a request frame body; UnsupportedVersionError carries the parsed header."""
    header, offset = parse_request_header(frame)
    return header, decode_request_body(header, frame, offset)


def encode_response(header: RequestHeader, body) -> bytearray:
    """Encode a whole response frame (size prefix included) answering ``header``."""
    out = bytearray(_PREFIX)
    _encode_response_into(out, header, body)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def encode_response_parts(header: RequestHeader, body) -> list:
    """Encode a response frame as parts: bytearray chunks and the body's placeholders.

    The first part starts with the size prefix, already counting the placeholders.
    """
    out = PartsWriter()
    out += _PREFIX
    _encode_response_into(out, header, body)
    return _sized_parts(out)


def _encode_response_into(out: bytearray, header: RequestHeader, body) -> None:
    api = get_api(header.api_key, header.api_version)
    version = response_header_version(header.api_key, header.api_version)
    encode_response_header(out, header.correlation_id, version)
    api.response.encode(body, header.api_version, out)


def _sized_parts(out: PartsWriter) -> list:
    """The parts of a frame written into `out` after a size prefix, the prefix set to their total."""
    parts = out.finish()
    _SIZE.pack_into(parts[0], 0, parts_size(parts) - 4)
    return parts


def api_versions_body(throttle_time_ms: int = 0):
    """The ApiVersions answer, generated from the registry."""
    keys = [api_versions.RESPONSE.cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions()]
    return api_versions.RESPONSE(error_code=0, api_keys=keys, throttle_time_ms=throttle_time_ms)


def encode_unsupported_api_versions(header: RequestHeader) -> bytearray:
    """Answer an ApiVersions version above ours: header v0, v0 body, error 35.

    The body lists only {18, min, max} and has no throttle field, whatever the
    requested version (RequestContext.java, ApiVersionsRequest.getErrorResponse):
    clients decode it as v0 and retry with our maximum.
    """
    api = APIS[API_VERSIONS]
    body = api.response(error_code=UNSUPPORTED_VERSION, api_keys=[
        {"api_key": API_VERSIONS, "min_version": api.min_version, "max_version": api.max_version}])
    out = bytearray(_PREFIX)
    encode_response_header(out, header.correlation_id, 0)
    api.response.encode(body, 0, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


# --- client side ----------------------------------------------------------------------

def encode_request(header: RequestHeader, body) -> bytearray:
    """Encode a whole request frame (size prefix included)."""
    out = bytearray(_PREFIX)
    _encode_request_into(out, header, body)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def encode_request_parts(header: RequestHeader, body, zero_copy: int = 1024) -> list:
    """Encode a request frame as parts, byte fields of `zero_copy` bytes or more not copied.

    The first part is a bytearray starting with the size prefix and the header;
    the big byte fields (a Produce's record batches) are the caller's own buffers,
    to be written with one ``sendmsg``. The frame size is the sum of the lengths.
    """
    out = PartsWriter(zero_copy)
    out += _PREFIX
    _encode_request_into(out, header, body)
    return _sized_parts(out)


def _encode_request_into(out: bytearray, header: RequestHeader, body) -> None:
    api = get_api(header.api_key, header.api_version)
    encode_request_header(out, header)
    api.request.encode(body, header.api_version, out)


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, object]:
    """Decode a response frame body; return (correlation_id, body)."""
    api = get_api(api_key, api_version)
    buf = as_memoryview(frame)
    header_version = response_header_version(api_key, api_version)
    correlation_id, offset = parse_response_header(buf, header_version)
    return correlation_id, api.response.decode(buf, api_version, offset)
