"""The fence the wake board puts between a store and a load (Dekker's pattern across processes)."""

from numba import njit

from mmlog.ipc import memory_fence


def test_the_fence_is_a_sequentially_consistent_llvm_fence():
    fresh = njit(memory_fence.full_fence.py_func)  # not the cached one: numba hides a cached kernel's code
    fresh()
    assert "fence seq_cst" in fresh.inspect_llvm(fresh.signatures[0])

