"""The numba lz4 frame decoder against cramjam's (the codec of record), on frames of every shape."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import cramjam
import numpy as np
import pytest

from mmlog.protocol import compression, lz4_frame


def samples(rng: random.Random):
    for size in (0, 1, 15, 16, 300, 1140, 65_536, 65_537, 300_000):
        yield rng.randbytes(size)  # incompressible: stored blocks
        yield (b"key-%d," % rng.randrange(50) + b"v" * rng.randrange(40)) * (size // 20 + 1)  # long matches
        yield bytes(rng.choice(b"ab") for _ in range(min(size, 5000)))  # short matches, overlapping copies


@pytest.mark.parametrize("level", [1, 9, 16])
def test_every_frame_cramjam_writes_decodes_to_the_same_bytes(level):
    rng = random.Random(level)
    for data in samples(rng):
        assert lz4_frame.decompress(bytes(cramjam.lz4.compress(data, level))) == data


def test_many_frames_decode_in_one_call_at_their_places():
    rng = random.Random(7)
    datas = [bytes(rng.choice(b"xyz") for _ in range(rng.randrange(0, 3000))) for _ in range(50)]
    frames = [compression.compress(compression.LZ4, d) for d in datas]
    src = np.frombuffer(b"".join(frames), np.uint8)
    ends = np.cumsum([len(f) for f in frames]).astype(np.int64)
    starts = ends - [len(f) for f in frames]
    sizes = np.zeros(len(frames), np.int64)
    assert lz4_frame.frame_sizes(src, starts, ends, sizes) == -1
    assert sizes.tolist() == [len(d) for d in datas]
    out_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.zeros(int(sizes.sum()), np.uint8)
    assert lz4_frame.decode_frames(src, starts, ends, out, out_starts) == -1
    assert out.tobytes() == b"".join(datas)


DAMAGED_FRAMES = """
import random
from mmlog.protocol import compression, lz4_frame
rng = random.Random(3)
good = compression.compress(compression.LZ4, b"hello hello hello hello " * 50)
refused = 0
for _ in range(300):
    bad = bytearray(good)
    for _ in range(rng.randrange(1, 4)):
        bad[rng.randrange(len(bad))] = rng.randrange(256)
    bad = bytes(bad[: rng.randrange(len(bad) + 1)])
    try:
        lz4_frame.decompress(bad)  # what decodes is whatever the damaged bytes say (the batch CRC guards them)
    except ValueError:
        refused += 1
print(refused)
"""


def test_a_damaged_frame_is_refused_or_decoded_without_reading_or_writing_out_of_bounds(tmp_path):
    """numba kernels check no bounds by default: here they do (NUMBA_BOUNDSCHECK, a fresh cache), so an
    access out of bounds raises IndexError instead of passing unseen."""
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", DAMAGED_FRAMES], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < int(done.stdout) < 300  # most damage is refused; some decodes (a literal byte changed)
    with pytest.raises(ValueError):
        lz4_frame.decompress(b"not a frame")
