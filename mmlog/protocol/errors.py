"""Errors of the wire codec.

They describe what is wrong with bytes or values, not what to answer: the broker
maps them to Kafka error codes (a `ProtocolError` in a request body is
INVALID_REQUEST, an `UnsupportedVersionError` is UNSUPPORTED_VERSION) or closes
the connection (a `FrameSizeError` leaves the stream unusable).
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Bytes that do not decode, or a value that cannot be encoded, under a schema."""


class TruncatedError(ProtocolError):
    """The input ended before the value being decoded did."""


class EncodeError(ProtocolError, ValueError):
    """A value does not fit its field (out of range, None where not nullable, ...)."""


class FrameSizeError(ProtocolError):
    """A frame's length prefix is negative or above the configured maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} outside [0, {max_size}]")
        self.size = size
        self.max_size = max_size


class UnsupportedVersionError(ProtocolError):
    """An (api_key, api_version) that this codec does not speak."""

    def __init__(self, api_key: int, api_version: int, header=None) -> None:
        super().__init__(f"unsupported api_key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.header = header
