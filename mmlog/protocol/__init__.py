"""mmlog's sans-IO Kafka wire codec: frames, headers, and schema-driven bodies.

No sockets, clocks or processes here: bytes in, message objects out, and back.
``schema`` explains how the tables in ``messages/`` become codecs; ``codec``
has the frame-level entry points; ``framing`` splits a byte stream into frames.
"""

from .codec import (API_VERSIONS, UNSUPPORTED_VERSION, api_versions_body, decode_request,
                    decode_request_body, decode_response, encode_request, encode_request_parts, encode_response,
                    encode_response_parts, encode_unsupported_api_versions, is_supported)
from .errors import (EncodeError, FrameSizeError, ProtocolError, TruncatedError,
                     UnsupportedVersionError)
from .framing import DEFAULT_MAX_FRAME_SIZE, FrameReader
from .header import (RequestHeader, parse_request_header, parse_response_header,
                     request_header_version, response_header_version)
from .messages import APIS, Api, get_api, precompile, supported_versions
from .schema import Field, Message, parts_size
from .structs import Encoded, Placeholder, Struct

__all__ = [
    "API_VERSIONS", "APIS", "Api", "DEFAULT_MAX_FRAME_SIZE", "EncodeError", "Encoded", "Field",
    "FrameReader", "FrameSizeError", "Message", "Placeholder", "ProtocolError",
    "RequestHeader", "Struct", "TruncatedError", "UNSUPPORTED_VERSION",
    "UnsupportedVersionError", "api_versions_body", "decode_request", "decode_request_body",
    "decode_response", "encode_request", "encode_request_parts", "encode_response", "encode_response_parts",
    "encode_unsupported_api_versions", "get_api", "is_supported", "parse_request_header",
    "parse_response_header", "parts_size", "precompile", "request_header_version",
    "response_header_version", "supported_versions",
]
