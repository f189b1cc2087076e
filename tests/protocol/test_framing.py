"""The framer: any chunking of a stream yields the same frames; bad prefixes fail early."""

import itertools
import os
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


# --- with a budget: big frames grow as their bytes arrive ---------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


class Ledger:
    """A budget that grants everything up to `limit` bytes held, and remembers what it granted."""

    def __init__(self, limit=1 << 62):
        self.limit = limit
        self.held = 0
        self.peak = 0
        self.calls = 0

    def reserve(self, want, need):
        self.calls += 1
        assert 0 < want <= need
        if self.held + want > self.limit:
            return 0
        self.held += want
        self.peak = max(self.peak, self.held)
        return want

    def release(self, n):
        self.held -= n
        assert self.held >= 0


def receive(reader, stream, sizes, budget):
    """Feed `stream` through get_buffer/buffer_updated in receives of the given sizes (cycled), releasing
    every frame as a consumer would once done with it."""
    frames, pos, i = [], 0, 0
    stream = memoryview(stream)
    while pos < len(stream):
        target = reader.get_buffer()
        n = min(len(target), sizes[i % len(sizes)], len(stream) - pos)
        i += 1
        target[:n] = stream[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
        for f in reader.pop_frames():
            frames.append(bytes(f))
            budget.release(len(f))
    return frames


def test_a_budgeted_big_frame_is_assembled_across_many_receive_sizes():
    rng = random.Random(11)
    bodies = [rng.randbytes(rng.choice([0, 1, 100, 5000, 70_000, 300_000, 2_000_000])) for _ in range(40)]
    stream = b"".join(map(frame, bodies))
    for sizes in ([1_000_000], [4096], [1, 7, 65_536, 100_000, 3], [rng.randint(1, 200_000) for _ in range(50)]):
        budget = Ledger()
        reader = FrameReader(budget=budget)
        assert receive(reader, stream, sizes, budget) == bodies
        assert budget.held == 0 and not reader.partial  # every byte granted came back


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(st.binary(max_size=3000), max_size=12),
       sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=20),
       buffer_size=st.sampled_from([16, 64, 1024]))
def test_any_chunking_yields_the_same_frames_with_a_budget(bodies, sizes, buffer_size):
    budget = Ledger()
    reader = FrameReader(buffer_size=buffer_size, budget=budget)
    assert receive(reader, b"".join(map(frame, bodies)), sizes, budget) == bodies
    assert budget.held == 0


def test_a_declared_size_costs_nothing_until_bytes_arrive():
    """100 MiB declared and 3 KiB sent: the frame waits in staging, nothing is reserved or allocated."""
    budget = Ledger()
    reader = FrameReader(budget=budget)
    reader.feed(struct.pack(">i", 100 << 20) + b"x" * 3000)
    assert budget.calls == 0 and reader.held == 0 and reader.partial
    assert len(reader.get_buffer()) == 64 * 1024 - 3004  # still receiving into staging


def test_a_big_frame_buffer_doubles_with_what_arrived():
    budget = Ledger()
    reader = FrameReader(budget=budget)
    size = 100 << 20
    reader.feed(struct.pack(">i", size))
    received = 0
    for step in (10_000, 70_000, 300_000, 1 << 20, 5 << 20, 40 << 20):
        reader.feed(bytes(step))
        received += step
        # At most twice what arrived (and a staging buffer's worth more at the start).
        assert budget.held <= 2 * max(received, 64 * 1024), (received, budget.held)
        assert reader.held == budget.held
    reader.feed(bytes(size - received))
    assert len(reader.next_frame()) == size and budget.held == size


def test_a_refused_reservation_starves_the_reader_until_resumed():
    body = bytes(range(256)) * 2000  # 512,000 bytes: grows past a 300 KB limit
    budget = Ledger(limit=300_000)
    reader = FrameReader(buffer_size=1024, budget=budget)
    stream = memoryview(frame(body) + frame(b"next"))
    pos = 0
    while (target := reader.get_buffer()) is not None:
        n = min(len(target), len(stream) - pos)
        target[:n] = stream[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
    assert reader.starved and not reader.queued and budget.held <= 300_000
    assert reader.get_buffer() is None and not reader.resume()  # still nothing granted
    budget.limit = 1 << 20
    assert reader.resume() and not reader.starved
    reader.feed(stream[pos:])
    assert [bytes(f) for f in reader.pop_frames()] == [body, b"next"]
    assert budget.held == len(body) + 4


def test_a_complete_small_frame_waits_in_staging_for_its_reservation():
    budget = Ledger(limit=5)
    reader = FrameReader(budget=budget)
    reader.feed(frame(b"abc") + frame(b"defgh") + frame(b"ij"))  # all staged; b"defgh" would pass the limit
    assert [bytes(f) for f in reader.pop_frames()] == [b"abc"] and reader.starved
    with pytest.raises(BufferError):
        reader.feed(b"more")  # a starved reader takes no bytes
    budget.release(3)
    assert not reader.resume()  # b"defgh" got its memory; b"ij" now waits for b"defgh" to be released
    assert [bytes(f) for f in reader.pop_frames()] == [b"defgh"] and reader.starved
    budget.release(5)
    assert reader.resume() and [bytes(f) for f in reader.pop_frames()] == [b"ij"]


def test_bytes_already_read_are_kept_past_the_budget_and_framed_when_memory_comes_back():
    budget = Ledger(limit=5)
    reader = FrameReader(budget=budget)
    reader.keep(frame(b"abc") + frame(b"defgh") + frame(b"ij"))  # read by the compiled path: never refused
    assert [bytes(f) for f in reader.pop_frames()] == [b"abc"] and reader.starved and not reader.empty
    budget.release(3)
    assert not reader.resume()
    assert [bytes(f) for f in reader.pop_frames()] == [b"defgh"]
    budget.release(5)
    assert reader.resume() and [bytes(f) for f in reader.pop_frames()] == [b"ij"]
    budget.release(2)
    assert reader.empty and budget.held == 0


def test_bytes_kept_past_a_big_frames_budget_wait_for_it():
    budget = Ledger(limit=100_000)
    reader = FrameReader(budget=budget)
    body = bytes(range(256)) * 1000  # 256,000 bytes: more than the budget allows at once
    reader.keep(frame(body)[:200_000])
    assert reader.starved and not reader.queued
    budget.limit = 1 << 20
    assert reader.resume()
    reader.feed(frame(body)[200_000:])
    assert [bytes(f) for f in reader.pop_frames()] == [body]


def test_discard_gives_back_queued_and_partial_frames():
    budget = Ledger()
    reader = FrameReader(buffer_size=1024, budget=budget)
    reader.feed(frame(b"a" * 100) + frame(b"b" * 50_000)[:30_000])
    assert reader.queued == 1 and budget.held > 100
    reader.discard()
    assert budget.held == 0 and not reader.partial and not reader.queued


def test_a_grown_buffer_is_copied_when_the_caller_still_holds_a_view_of_it():
    """get_buffer's view is valid until the next call; a caller that keeps a slice of it pins the buffer,
    and the reader then grows by copying rather than failing."""
    body = os.urandom(1 << 20)
    budget = Ledger()
    reader = FrameReader(buffer_size=1024, budget=budget)
    kept, stream, pos = [], memoryview(frame(body)), 0
    while pos < len(stream):
        target = reader.get_buffer()
        kept.append(target[:1])  # a slice outlives the call
        n = min(len(target), 3000, len(stream) - pos)
        target[:n] = stream[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
    assert bytes(reader.next_frame()) == body
