"""Request and response headers (Kafka: RequestHeader.json / ResponseHeader.json).

Request header layouts::

    v0  api_key int16, api_version int16, correlation_id int32
    v1  v0 + client_id nullable string (int16 length)
    v2  v1 + tag section              (client_id keeps its int16 length)

Response header layouts::

    v0  correlation_id int32
    v1  v0 + tag section

Which one a message uses follows Kafka's rule: a flexible (api, version) uses
request header v2 and response header v1, others v1 and v0, except that the
ApiVersions response header is always v0 (so a client can read the answer to a
version it guessed too high). Because client_id never becomes compact, the
header of *any* request parses without knowing the API: `parse_request_header`
does exactly that, so the broker can answer an unsupported version.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable, NamedTuple

from . import primitives as p
from .errors import TruncatedError
from .messages import APIS
from .messages.api_versions import API_KEY as API_VERSIONS_KEY
from .schema import as_memoryview

CONTROLLED_SHUTDOWN_KEY = 7  # v0 is the only request with header v0

_FIXED = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORRELATION_ID = struct.Struct(">i")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


# api_key -> first flexible version (Kafka's flexibleVersions are all "N+")
_FIRST_FLEXIBLE = {key: api.request.flexible[0] for key, api in APIS.items()
                   if api.request.flexible is not None}
_NEVER = 0x7FFF


def _flexible(api_key: int, api_version: int) -> bool:
    return api_version >= _FIRST_FLEXIBLE.get(api_key, _NEVER)


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if _flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def parse_request_header(frame) -> tuple[RequestHeader, int]:
    """Parse the header of any request frame; return it and where the body starts.

    For an unknown API the tag section (which only flexible versions have) cannot
    be recognised, so the body offset is where client_id ends.
    """
    buf = as_memoryview(frame)
    try:
        api_key, api_version, correlation_id = _FIXED.unpack_from(buf, 0)
    except struct.error:
        raise TruncatedError(f"request header needs 8 bytes, got {len(buf)}") from None
    version = request_header_version(api_key, api_version)
    client_id, pos = (None, 8) if version == 0 else p.read_nullable_string(buf, 8)
    if version >= 2:
        pos = p.skip_tag_section(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(out: bytearray, header: RequestHeader) -> None:
    """Append a request header in the version its (api_key, api_version) uses."""
    version = request_header_version(header.api_key, header.api_version)
    out += _FIXED.pack(header.api_key, header.api_version, header.correlation_id)
    if version >= 1:
        p.write_nullable_string(out, header.client_id)
    if version >= 2:
        out.append(0)  # empty tag section


def encode_response_header(out: bytearray, correlation_id: int, version: int) -> None:
    out += _CORRELATION_ID.pack(correlation_id)
    if version >= 1:
        out.append(0)  # empty tag section


def parse_response_header(frame, version: int) -> tuple[int, int]:
    """Parse a response header; return (correlation_id, where the body starts)."""
    buf = as_memoryview(frame)
    correlation_id, pos = p.read_int32(buf, 0)
    if version >= 1:
        pos = p.skip_tag_section(buf, pos)
    return correlation_id, pos


# Peeking at a request frame without parsing it (the processor's Produce fast path). A frame
# (its size prefix already taken off) starts:
#
#   bytes 0-1  api_key         int16, big-endian
#   bytes 2-3  api_version     int16, big-endian
#   bytes 4-7  correlation_id  int32
#   bytes 8-9  client_id size  int16, -1 for null (request header v1 and up)
#   bytes 10-  client_id       UTF-8, that many bytes


def request_matcher(api_key: int, versions: Iterable[int]) -> Callable[[object], bool]:
    """A test of a request frame's first four bytes: is it `api_key` at one of `versions`? Versions
    past 255 never match (none exist)."""
    hi, lo = api_key >> 8 & 0xFF, api_key & 0xFF
    wanted = frozenset(v for v in versions if 0 <= v <= 0xFF)

    def matches(frame) -> bool:
        return len(frame) >= 4 and frame[3] in wanted and frame[1] == lo and frame[0] == hi and frame[2] == 0

    return matches


def peek_client_id(frame) -> str | None:
    """The client id of a request frame with header v1 or later, read without parsing the header
    (None if it is null or the frame too short to say)."""
    size = int.from_bytes(frame[8:10], "big", signed=True) if len(frame) >= 10 else -1
    return None if size < 0 else bytes(frame[10:10 + size]).decode("utf-8", "replace")
