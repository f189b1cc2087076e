"""The framer: any chunking of a stream yields the same frames; bad prefixes fail early."""

import itertools
import random
import struct

import pytest

from mmlog.protocol.errors import FrameSizeError
from mmlog.protocol.framing import FrameReader


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


BODIES = [b"first", b"", b"x" * 40, b"last one"]  # the 40-byte body overflows a 16-byte staging
STREAM = b"".join(map(frame, BODIES))


def read_all(chunks, **options) -> list[bytes]:
    reader = FrameReader(**options)
    frames = []
    for chunk in chunks:
        reader.feed(chunk)
        frames += [bytes(f) for f in reader.pop_frames()]
    assert not reader.partial
    return frames


def splits(data: bytes, cuts):
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("buffer_size", [16, 64 * 1024])
def test_every_two_chunk_split(buffer_size):
    for cut in range(len(STREAM) + 1):
        assert read_all(splits(STREAM, [cut]), buffer_size=buffer_size) == BODIES, cut


@pytest.mark.parametrize("buffer_size", [16, 64 * 1024])
def test_every_three_chunk_split(buffer_size):
    for cuts in itertools.combinations(range(1, len(STREAM)), 2):
        assert read_all(splits(STREAM, cuts), buffer_size=buffer_size) == BODIES, cuts


@pytest.mark.parametrize("buffer_size", [16, 64 * 1024])
def test_one_byte_at_a_time(buffer_size):
    chunks = [STREAM[i:i + 1] for i in range(len(STREAM))]
    assert read_all(chunks, buffer_size=buffer_size) == BODIES


def test_many_frames_in_one_chunk():
    bodies = [bytes([i]) * i for i in range(200)]
    assert read_all([b"".join(map(frame, bodies))]) == bodies


def test_receive_into_the_readers_buffer():
    """The recv_into path: random receive sizes against a long pipelined stream."""
    rng = random.Random(7)
    bodies = [rng.randbytes(rng.choice([0, 1, 100, 5000, 70_000, 300_000])) for _ in range(60)]
    stream = memoryview(b"".join(map(frame, bodies)))
    reader, frames, pos = FrameReader(), [], 0
    while pos < len(stream):
        target = reader.get_buffer()
        n = min(len(target), rng.randint(1, 100_000), len(stream) - pos)
        target[:n] = stream[pos:pos + n]  # what sock.recv_into(target) would do
        reader.buffer_updated(n)
        pos += n
        frames += [bytes(f) for f in reader.pop_frames()]
    assert frames == bodies


def test_a_large_frame_is_received_in_place():
    body = bytes(range(256)) * 1000
    reader = FrameReader(buffer_size=1024)
    reader.feed(frame(body)[:100])
    target = reader.get_buffer()
    assert len(target) == len(body) - 96  # exactly the rest of this frame
    target[:] = body[96:]
    reader.buffer_updated(len(target))
    received = reader.next_frame()
    assert received.obj is target.obj  # the body buffer we received into, not a copy
    assert received == body


def test_frames_are_independent_of_later_input():
    reader = FrameReader(buffer_size=16)
    reader.feed(frame(b"abc") + frame(b"de")[:3])
    first = reader.next_frame()
    reader.feed(frame(b"de")[3:] + frame(b"zzzzzzzz"))
    assert bytes(first) == b"abc"
    assert [bytes(f) for f in reader.pop_frames()] == [b"de", b"zzzzzzzz"]


def test_next_frame_returns_none_when_nothing_is_complete():
    reader = FrameReader()
    assert reader.next_frame() is None
    reader.feed(frame(b"abc")[:5])
    assert reader.next_frame() is None and reader.partial


@pytest.mark.parametrize("prefix", [struct.pack(">i", 1025), struct.pack(">i", -1),
                                    struct.pack(">i", -(2**31))])
def test_bad_length_prefix_fails_before_the_body_is_buffered(prefix):
    reader = FrameReader(max_frame_size=1024)
    stream = frame(b"ok") + prefix
    for byte in stream[:-1]:
        reader.feed(bytes([byte]))
    with pytest.raises(FrameSizeError) as info:
        reader.feed(stream[-1:])  # the last byte of the prefix
    assert info.value.size == struct.unpack(">i", prefix)[0]
    assert [bytes(f) for f in reader.pop_frames()] == [b"ok"]  # earlier frames survive
    with pytest.raises(FrameSizeError):
        reader.get_buffer()  # the stream has no boundary left


def test_max_frame_size_is_inclusive():
    assert read_all([frame(b"x" * 1024)], max_frame_size=1024) == [b"x" * 1024]


def test_frames_in_every_chunking_stop_at_a_bad_prefix():
    stream = frame(b"one") + frame(b"two") + struct.pack(">i", 99)
    for cut in range(1, len(stream)):
        reader = FrameReader(max_frame_size=50)
        with pytest.raises(FrameSizeError):
            reader.feed(stream[:cut])
            reader.feed(stream[cut:])
        assert [bytes(f) for f in reader.pop_frames()] == [b"one", b"two"]
