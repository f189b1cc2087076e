"""The producer's Produce v8 requests, without the generic codec, written with one sendmsg.

The schema-driven codec (`mmlog.protocol`) encodes any request, field by field, in
about 7 µs for a one-batch Produce request and copies the batches into the frame.
The sender sends thousands of these a second, so it writes them here: the header
and the few fixed fields with `struct`, the batches *not copied* but queued as
buffers of their own, and every queued request of a step written by one
`socket.sendmsg` (a syscall per step instead of one per request). The codec stays
the reference: tests check that these frames equal `encode_request`'s bytes.

Produce v8 request (non-flexible; request header v1)::

    int32 size | int16 api_key=0 | int16 version=8 | int32 correlation_id | string client_id
    nullable string transactional_id (-1) | int16 acks | int32 timeout_ms
    int32 topics  { string name | int32 partitions { int32 index | int32 size | records } }

Produce v8 response (header v0)::

    int32 correlation_id | int32 topics { string name | int32 partitions { int32 index |
    int16 error_code | int64 base_offset | int64 log_append_time_ms | int64 log_start_offset |
    int32 record_errors { int32 batch_index | nullable string message } | nullable string
    error_message } } | int32 throttle_time_ms

`ProduceChannel` is `Channel` plus what this needs: queue a frame given as buffers
(`queue_frame`), write everything queued with one sendmsg (`on_writable`), and
decode Produce v8 responses with `decode_produce_response` (the generic codec
decodes anything else). Responses are matched to requests exactly as `Channel` does.
"""

from __future__ import annotations

import struct
import time

from mmlog.client.channel import Channel, _Done
from mmlog.client.connection import ConnectionClosed
from mmlog.protocol import ProtocolError, decode_response

API_KEY = 0
VERSION = 8
_HEADER = struct.Struct(">ihhih")  # size, api_key, version, correlation id, client_id length
_BODY = struct.Struct(">hhii")  # transactional_id (null), acks, timeout_ms, topic count
_NAME = struct.Struct(">h")
_COUNT = struct.Struct(">i")
_PART = struct.Struct(">ii")  # partition index, records size
_I16 = struct.Struct(">h")
_RESULT = struct.Struct(">ihqqqi")  # index, error, base offset, append time, log start, record_errors count
CORRELATION_AT = 8
MAX_IOV = 512  # buffers per sendmsg (IOV_MAX is 1024 on Linux)


def encode_produce(client_id: bytes, acks: int, timeout_ms: int, topics: list) -> tuple[list, int]:
    """The frame of a Produce v8 request as buffers, and its total size.

    topics: [(name as bytes, [(partition, batch bytes), ...]), ...]. The correlation
    id (bytes 8-11 of the first buffer) is 0: `ProduceChannel.queue_frame` fills it.
    """
    head = bytearray(_HEADER.size + len(client_id) + _BODY.size)
    parts = [head]
    size = len(head)
    pending = bytearray()  # fixed fields between two batches
    for name, partitions in topics:
        pending += _NAME.pack(len(name))
        pending += name
        pending += _COUNT.pack(len(partitions))
        for index, data in partitions:
            pending += _PART.pack(index, len(data))
            parts.append(pending)
            parts.append(data)
            size += len(pending) + len(data)
            pending = bytearray()
    if pending:
        parts.append(pending)
        size += len(pending)
    _HEADER.pack_into(head, 0, size - 4, API_KEY, VERSION, 0, len(client_id))
    head[_HEADER.size:_HEADER.size + len(client_id)] = client_id
    _BODY.pack_into(head, _HEADER.size + len(client_id), -1, acks, timeout_ms, len(topics))
    return parts, size


class PartitionResult:
    """One partition's answer, with the attribute names of the codec's PartitionProduceResponse."""

    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "error_message")

    def __init__(self, index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message):
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.error_message = error_message


class TopicResult:
    __slots__ = ("name", "partition_responses")

    def __init__(self, name, partition_responses):
        self.name = name
        self.partition_responses = partition_responses


class ProduceResult:
    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses, throttle_time_ms):
        self.responses = responses
        self.throttle_time_ms = throttle_time_ms


def _string(buf, pos):
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ProtocolError("string runs past the frame")
    return str(buf[pos:pos + n], "utf-8"), pos + n


def decode_produce_response(frame) -> tuple[int, ProduceResult]:
    """(correlation id, body) of a Produce v8 response frame (without its size prefix)."""
    buf = memoryview(frame)
    try:
        correlation_id, topics = _PART.unpack_from(buf, 0)
        pos = 8
        responses = []
        for _ in range(topics):
            name, pos = _string(buf, pos)
            (count,) = _COUNT.unpack_from(buf, pos)
            pos += 4
            partitions = []
            for _ in range(count):
                index, error, base, append_time, log_start, nerrors = _RESULT.unpack_from(buf, pos)
                pos += _RESULT.size
                for _ in range(max(nerrors, 0)):
                    _, pos = _string(buf, pos + 4)
                message, pos = _string(buf, pos)
                partitions.append(PartitionResult(index, error, base, append_time, log_start, message))
            responses.append(TopicResult(name, partitions))
        (throttle,) = _COUNT.unpack_from(buf, pos)
        pos += 4
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"bad Produce v8 response: {exc}") from None
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} bytes left over after a Produce v8 response")
    return correlation_id, ProduceResult(responses, throttle)


class ProduceChannel(Channel):
    """A `Channel` that also queues frames encoded elsewhere and writes them with sendmsg."""

    def queue_frame(self, parts: list, api_key: int, version: int, callback, expect_response: bool = True) -> None:
        """Queue a request frame (a list of buffers, correlation id left 0); `on_writable` sends it."""
        if self.closed:
            if callback is not None:
                callback(None, ConnectionClosed(f"connection to {self.host}:{self.port} is closed"))
            return
        correlation_id = next(self._ids)
        _COUNT.pack_into(parts[0], CORRELATION_AT, correlation_id)
        out = self._out
        for part in parts:
            if len(part):
                out.append(memoryview(part))
        if expect_response:
            self._inflight.append((correlation_id, api_key, version, callback, time.monotonic()))
        elif callback is not None:
            out.append(_Done(callback))

    def on_writable(self) -> None:
        """Write what the socket takes, many buffers per sendmsg; fail the channel if the peer is gone."""
        out = self._out
        try:
            while out:
                head = out[0]
                if head.__class__ is _Done:
                    out.popleft()
                    head.callback(None, None)
                    continue
                buffers = []
                for item in out:
                    if item.__class__ is _Done or len(buffers) == MAX_IOV:
                        break
                    buffers.append(item)
                n = self.sock.sendmsg(buffers)
                for item in buffers:
                    size = len(item)
                    if n < size:
                        out[0] = item[n:]
                        return  # the socket buffer is full
                    out.popleft()
                    n -= size
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(ConnectionClosed(f"send to {self.host}:{self.port} failed: {exc}"))

    def _decode(self, api_key: int, version: int, frame):
        """Produce v8 responses through decode_produce_response; anything else as Channel does."""
        if api_key == API_KEY and version == VERSION:
            return decode_produce_response(frame)
        return decode_response(api_key, version, frame)

