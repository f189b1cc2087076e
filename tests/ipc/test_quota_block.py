"""The shared quota windows: Kafka's sampled Rate over W windows, counted by several writers, read by all."""

import os

import numpy as np
import pytest

from mmlog.ipc.quota_block import QuotaBlock, record_rate, record_rate_py, sensor_key

T0 = 1_000_000_000_000  # a window boundary (ms)


def test_a_new_sensor_is_measured_over_at_least_w_minus_1_windows():
    block = QuotaBlock(processors=2, windows=11, window_ms=1000)
    slot = block.slot("producer_byte_rate::a", T0)
    block.record(slot, 0, T0 + 500, 5_000_000)
    assert block.measure(slot, T0 + 500) == (5_000_000 * 1000 / 10_500, 10_500)  # 10 windows padded + 0.5 s


def test_writers_add_up_and_the_throttle_time_is_kafkas():
    block = QuotaBlock(processors=2, windows=3, window_ms=1000)
    slot = block.slot("s", T0)
    block.record(slot, 0, T0, 1_500_000)
    block.record(slot, 1, T0 + 1000, 1_500_000)  # another processor, the next window
    rate, span = block.measure(slot, T0 + 1000)
    assert (rate, span) == (1_500_000.0, 2000)  # 3 MB over 2 s
    assert block.throttle_ms(slot, T0 + 1000, 1_000_000) == round((1.5 - 1) / 1 * 2000)  # (O - T) / T * W
    assert block.throttle_ms(slot, T0 + 1000, 2_000_000) == 0


def test_windows_older_than_w_no_longer_count_and_a_writer_resets_its_reused_cell():
    block = QuotaBlock(processors=1, windows=3, window_ms=1000)
    slot = block.slot("s", T0)
    block.record(slot, 0, T0, 9_000_000)
    assert block.measure(slot, T0 + 3000)[0] == 0.0  # window 0 left the 3 windows
    block.record(slot, 0, T0 + 3000, 1000)  # same cell as window 0: reset first
    assert block.measure(slot, T0 + 3000)[0] == 1000 * 1000 / 2000


def test_sensors_get_their_own_slots_and_find_them_again_from_another_process():
    block = QuotaBlock(processors=2, windows=3, window_ms=1000, slots=8)
    a, b = block.slot("a", T0), block.slot("b", T0)
    assert a != b and block.slot("a", T0) == a
    pid = os.fork()
    if pid == 0:  # a processor: records into the shared block
        block.record(block.slot("a", T0), 1, T0, 700)
        os._exit(0)
    os.waitpid(pid, 0)
    assert block.measure(a, T0)[0] == 700 * 1000 / 2000


def test_a_full_block_reuses_a_stale_slot():
    block = QuotaBlock(processors=1, windows=3, window_ms=1000, slots=2)
    first = block.slot("x", T0)
    block.record(first, 0, T0, 1)
    block.slot("y", T0)
    later = T0 + 2 * 3_600_000
    z = block.slot("z", later)  # x's windows are hours old and y never recorded: a stale slot goes to z
    assert block.keys[z] == sensor_key("z") and block.values[z].sum() == 0 and block.slot("z", later) == z


def test_a_full_block_of_live_sensors_shares_a_slot_and_takes_none_over():
    block = QuotaBlock(processors=1, windows=3, window_ms=1000, slots=2)
    for name in ("x", "y"):
        block.record(block.slot(name, T0), 0, T0, 1)
    keys = block.keys.copy()
    shared = block.slot("z", T0)
    assert shared == sensor_key("z") % 2 and (block.keys == keys).all()  # x and y keep theirs; z shares its home


def test_the_kernel_agrees_with_its_plain_python_reference_on_random_histories():
    rng = np.random.default_rng(7)
    for _ in range(50):
        shape = (3, int(rng.integers(1, 4)), int(rng.integers(2, 12)))
        ids = rng.integers(T0 // 1000 - 20, T0 // 1000 + 1, size=shape).astype(np.int64)
        values = rng.random(shape) * 1e6
        ids_py, values_py = ids.copy(), values.copy()
        args = (int(rng.integers(0, 3)), int(rng.integers(0, shape[1])), T0 + int(rng.integers(0, 1000)), 1000,
                float(rng.choice([0.0, 1234.5, -10.0])))
        assert record_rate(ids, values, *args) == pytest.approx(record_rate_py(ids_py, values_py, *args))
        assert (ids == ids_py).all() and np.allclose(values, values_py)
